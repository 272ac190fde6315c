/* The Minimizer (solver/qcp.py): the rotation of a covariance by the eigenvector of the largest
 * eigenvalue of its symmetric 4x4 key matrix, in closed form where it is well defined, by Jacobi
 * sweeps elsewhere. */
#ifndef EWBIK_QCP_H
#define EWBIK_QCP_H

#include "internal.h"

/* The unit rotation q (w, x, y, z) best aligning the pairs of the covariance s (3x3, row-major)
 * (qcp.rotations_from_covariance); `trust` is qcp.ADJUGATE_TRUST, `prefer_small` qcp.PREFER_SMALL;
 * use_e0 selects the references' eigenvalue estimate e0. */
INTERNAL void qcp_rotation_from_covariance(const double *s, double prefer_small, double trust, int use_e0, double e0,
                                           double *q);

/* The unit rotation of a 3x3 matrix m (row-major), the nearest one for a matrix a little off
 * (quat.from_matrix). */
INTERNAL void quat_from_matrix(const double *m, double trust, double *q);

/* The top eigenvector of each of count matrices (count, 16) -> out (count, 4), not normalized,
 * and whether the closed form was trusted (count,): the tests' way to compare the C steps with
 * the numpy ones. */
void ewbik_top_eigenvectors(const double *matrices, int count, double trust, double *out, int *trusted);

#endif
