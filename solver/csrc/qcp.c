/* The Minimizer's eigen solve and the rotations found by it; each function mirrors its numpy
 * namesake in solver/qcp.py (quat_from_matrix: quat.py's). */
#include <math.h>
#include <string.h>

#include "qcp.h"
#include "vecmath.h"

#define NEWTON_STEPS 20          /* qcp.NEWTON_STEPS */
#define NEWTON_TOLERANCE 1e-11   /* qcp.NEWTON_TOLERANCE */

/* Eigenvector of the largest eigenvalue by cyclic Jacobi sweeps: the fallback. */
static void jacobi_top_eigenvector(const double *matrix, double *out)
{
    double a[16], v[16] = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1};
    memcpy(a, matrix, sizeof a);
    for (int sweep = 0; sweep < 64; sweep++) {
        double off = 0.0, diag = 0.0;
        for (int p = 0; p < 4; p++) {
            diag += a[5 * p] * a[5 * p];
            for (int r = p + 1; r < 4; r++)
                off += a[4 * p + r] * a[4 * p + r];
        }
        if (off <= 1e-36 * diag || off < 1e-300)
            break;
        for (int p = 0; p < 3; p++) {
            for (int r = p + 1; r < 4; r++) {
                double apr = a[4 * p + r];
                if (apr == 0.0)
                    continue;
                double theta = (a[5 * r] - a[5 * p]) / (2.0 * apr);
                double t = (theta >= 0.0 ? 1.0 : -1.0) / (fabs(theta) + sqrt(theta * theta + 1.0));
                double c = 1.0 / sqrt(t * t + 1.0), s = t * c;
                for (int k = 0; k < 4; k++) {
                    double akp = a[4 * k + p], akr = a[4 * k + r];
                    a[4 * k + p] = c * akp - s * akr;
                    a[4 * k + r] = s * akp + c * akr;
                }
                for (int k = 0; k < 4; k++) {
                    double apk = a[4 * p + k], ark = a[4 * r + k];
                    a[4 * p + k] = c * apk - s * ark;
                    a[4 * r + k] = s * apk + c * ark;
                }
                for (int k = 0; k < 4; k++) {
                    double vkp = v[4 * k + p], vkr = v[4 * k + r];
                    v[4 * k + p] = c * vkp - s * vkr;
                    v[4 * k + r] = s * vkp + c * vkr;
                }
            }
        }
    }
    int best = 0;
    for (int i = 1; i < 4; i++)
        if (a[5 * i] > a[5 * best])
            best = i;
    for (int k = 0; k < 4; k++)
        out[k] = v[4 * k + best];
}

/* The minor of m without row i and column j. */
static double minor3(const double *m, int i, int j)
{
    int r[3], c[3];
    for (int k = 0, a = 0, b = 0; k < 4; k++) {
        if (k != i)
            r[a++] = k;
        if (k != j)
            c[b++] = k;
    }
#define M(p, q) m[4 * r[p] + c[q]]
    return M(0, 0) * (M(1, 1) * M(2, 2) - M(1, 2) * M(2, 1)) - M(0, 1) * (M(1, 0) * M(2, 2) - M(1, 2) * M(2, 0)) +
           M(0, 2) * (M(1, 0) * M(2, 1) - M(1, 1) * M(2, 0));
#undef M
}

/* The largest column of adj(m) for a nearly singular symmetric m, and its norm
 * (qcp.adjugate_eigenvector). */
static double adjugate_eigenvector(const double *m, double *out)
{
    int best = 0;
    double best_diagonal = -1.0;
    for (int i = 0; i < 4; i++) {
        double d = fabs(minor3(m, i, i));
        if (d > best_diagonal)
            best_diagonal = d, best = i;
    }
    double norm = 0.0;
    for (int i = 0; i < 4; i++) {
        out[i] = ((i + best) % 2 ? -1.0 : 1.0) * minor3(m, i, best);
        norm += out[i] * out[i];
    }
    return sqrt(norm);
}

/* (c2, c1, c0) of det(x I - b) = x^4 + c2 x^2 + c1 x + c0 for a traceless symmetric b. */
static void characteristic_polynomial(const double *b, double *c)
{
    double b2[16], tr2 = 0.0, tr3 = 0.0;
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) {
            double sum = 0.0;
            for (int k = 0; k < 4; k++)
                sum += b[4 * i + k] * b[4 * k + j];
            b2[4 * i + j] = sum;
        }
    for (int i = 0; i < 4; i++) {
        tr2 += b2[5 * i];
        for (int j = 0; j < 4; j++)
            tr3 += b2[4 * i + j] * b[4 * j + i];
    }
    double det = 0.0;
    for (int j = 0; j < 4; j++)
        det += (j % 2 ? -1.0 : 1.0) * b[j] * minor3(b, 0, j);
    c[0] = -0.5 * tr2, c[1] = -tr3 / 3.0, c[2] = det;
}

/* The smaller of Gershgorin's and the Frobenius bound of b's largest eigenvalue. */
static double eigenvalue_bound(const double *b)
{
    double gershgorin = -INFINITY, frobenius = 0.0;
    for (int i = 0; i < 4; i++) {
        double row = b[5 * i];
        for (int j = 0; j < 4; j++) {
            frobenius += b[4 * i + j] * b[4 * i + j];
            if (j != i)
                row += fabs(b[4 * i + j]);
        }
        gershgorin = fmax(gershgorin, row);
    }
    return fmin(gershgorin, sqrt(frobenius));
}

/* Newton from above to the largest root; returns 1 when it converged within NEWTON_STEPS. */
static int largest_root(const double *c, double start, double *root)
{
    double x = start, tiny = NEWTON_TOLERANCE * fmax(fabs(start), 1e-300), step = 0.0;
    for (int i = 0; i < NEWTON_STEPS; i++) {
        step = (((x * x + c[0]) * x + c[1]) * x + c[2]) / ((4.0 * x * x + 2.0 * c[0]) * x + c[1]);
        if (!(step > 0.0 && step < INFINITY))
            step = 0.0;
        x -= step;
        if (step <= tiny)
            break;
    }
    *root = x;
    return step <= tiny;
}

/* adj(b - root I)'s eigenvector and strength. */
static double shifted_adjugate(const double *b, double root, double *out)
{
    double m[16];
    memcpy(m, b, sizeof m);
    for (int i = 0; i < 4; i++)
        m[5 * i] -= root;
    return adjugate_eigenvector(m, out);
}

/* qcp.closed_form_eigenvectors for one matrix: 1 when trusted (out then a unit vector). */
static int closed_form_eigenvector(const double *m, double trust, double *out)
{
    double b[16], c[3], root, scale = 0.0, shift = 0.25 * (m[0] + m[5] + m[10] + m[15]);
    for (int i = 0; i < 16; i++) {
        b[i] = m[i];
        scale = fmax(scale, fabs(m[i]));
    }
    for (int i = 0; i < 4; i++)
        b[5 * i] -= shift;
    characteristic_polynomial(b, c);
    int converged = largest_root(c, eigenvalue_bound(b), &root);
    double first_strength = shifted_adjugate(b, root, out), rayleigh = 0.0;
    double norm2 = fmax(first_strength, 1e-300) * fmax(first_strength, 1e-300);
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++)
            rayleigh += out[i] * b[4 * i + j] * out[j] / norm2;
    double strength = shifted_adjugate(b, rayleigh, out), needed = trust * scale * scale * scale;
    if (!(converged && first_strength > needed && strength > needed && scale > 1e-300))
        return 0;
    for (int i = 0; i < 4; i++)
        out[i] /= strength;
    return 1;
}

/* Row-major m (4x4) -> out (4), not normalized; returns 1 when the closed form was trusted,
 * 0 when the Jacobi sweeps decided (qcp.top_eigenvectors). */
static int top_eigenvector(const double *m, double trust, double *out)
{
    if (closed_form_eigenvector(m, trust, out))
        return 1;
    jacobi_top_eigenvector(m, out);
    return 0;
}

/* QCP on one covariance s (3x3, qcp.rotations_from_covariance), its key biased toward the smaller
 * turn by prefer_small; use_e0 selects the references' e0. */
void qcp_rotation_from_covariance(const double *s, double prefer_small, double trust, int use_e0, double e0,
                                  double *q)
{
    double k[16];
    k[0] = s[0] + s[4] + s[8];
    k[1] = k[4] = s[5] - s[7];
    k[2] = k[8] = s[6] - s[2];
    k[3] = k[12] = s[1] - s[3];
    k[5] = s[0] - s[4] - s[8];
    k[6] = k[9] = s[1] + s[3];
    k[7] = k[13] = s[6] + s[2];
    k[10] = -s[0] + s[4] - s[8];
    k[11] = k[14] = s[5] + s[7];
    k[15] = -s[0] - s[4] + s[8];
    double scale = 0.0;
    for (int i = 0; i < 16; i++)
        scale = fmax(scale, fabs(k[i]));
    if (scale < 1e-300) {
        q[0] = 1.0, q[1] = q[2] = q[3] = 0.0;
        return;
    }
    k[0] += prefer_small * scale;
    top_eigenvector(k, trust, q);
    double adjugate[4];
    if (use_e0 && shifted_adjugate(k, e0, adjugate) > 1e-6 * scale * scale * scale)
        memcpy(q, adjugate, sizeof adjugate);
    quat_normalize(q);
}

/* quat.from_matrix: the 4x4 eigen form, exact for rotations, nearest rotation otherwise. */
void quat_from_matrix(const double *m, double trust, double *q)
{
    double xx = m[0], xy = m[1], xz = m[2], yx = m[3], yy = m[4], yz = m[5], zx = m[6], zy = m[7], zz = m[8];
    double k[16] = {xx + yy + zz, zy - yz,      xz - zx,      yx - xy,      zy - yz, xx - yy - zz,
                    xy + yx,      xz + zx,      xz - zx,      xy + yx,      yy - xx - zz, yz + zy,
                    yx - xy,      xz + zx,      yz + zy,      zz - xx - yy};
    top_eigenvector(k, trust, q);
    quat_normalize(q);
}

void ewbik_top_eigenvectors(const double *matrices, int count, double trust, double *out, int *trusted)
{
    for (int i = 0; i < count; i++)
        trusted[i] = top_eigenvector(matrices + 16 * i, trust, out + 4 * i);
}
