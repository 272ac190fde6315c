/* The Minimizer's eigen solve (solver/qcp.py): the eigenvector of the largest eigenvalue of a
 * symmetric 4x4 matrix, in closed form where it is well defined, by Jacobi sweeps elsewhere. */
#ifndef EWBIK_QCP_H
#define EWBIK_QCP_H

/* Row-major m (4x4) -> out (4), not normalized; returns 1 when the closed form was trusted,
 * 0 when the Jacobi sweeps decided (qcp.top_eigenvectors). */
int qcp_top_eigenvector(const double *m, double trust, double *out);

/* The largest column of adj(m) for a nearly singular symmetric m, and its norm
 * (qcp.adjugate_eigenvector). */
double qcp_adjugate_eigenvector(const double *m, double *out);

/* qcp_top_eigenvector over count matrices (count, 16) -> out (count, 4), trusted (count,):
 * the tests' way to compare the C steps with the numpy ones. */
void ewbik_top_eigenvectors(const double *matrices, int count, double trust, double *out, int *trusted);

#endif
