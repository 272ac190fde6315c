/* Vector, matrix (row-major 3x3) and quaternion (w, x, y, z; Hamilton) helpers shared by the C
 * files, each written once so that every file rounds them alike. */
#ifndef EWBIK_VECMATH_H
#define EWBIK_VECMATH_H

#include <math.h>
#include <string.h>

#define PI 3.14159265358979323846
#define EPS 1e-12 /* numeric guard for degenerate vectors (the numpy code's literal), not a tuning constant */

static inline double dot3(const double a[3], const double b[3])
{
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
}

/* a x b; out may alias a or b. */
static inline void cross3(const double a[3], const double b[3], double out[3])
{
    double x = a[1] * b[2] - a[2] * b[1], y = a[2] * b[0] - a[0] * b[2], z = a[0] * b[1] - a[1] * b[0];
    out[0] = x, out[1] = y, out[2] = z;
}

static inline double dot_n(const double *a, const double *b, int n)
{
    double s = 0.0;
    for (int i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

/* a b; out may alias a or b. */
static inline void matmul(const double *a, const double *b, double *out)
{
    double r[9];
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++)
            r[3 * i + j] = a[3 * i] * b[j] + a[3 * i + 1] * b[3 + j] + a[3 * i + 2] * b[6 + j];
    memcpy(out, r, sizeof r);
}

/* a^T b; out may alias a or b. */
static inline void matmul_tn(const double *a, const double *b, double *out)
{
    double r[9];
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++)
            r[3 * i + j] = a[i] * b[j] + a[3 + i] * b[3 + j] + a[6 + i] * b[6 + j];
    memcpy(out, r, sizeof r);
}

/* m v; out may alias v. */
static inline void matvec(const double *m, const double *v, double *out)
{
    double x = dot3(m, v), y = dot3(m + 3, v), z = dot3(m + 6, v);
    out[0] = x, out[1] = y, out[2] = z;
}

/* m^T v; out may alias v. */
static inline void matvec_t(const double *m, const double *v, double *out)
{
    double x = m[0] * v[0] + m[3] * v[1] + m[6] * v[2];
    double y = m[1] * v[0] + m[4] * v[1] + m[7] * v[2];
    double z = m[2] * v[0] + m[5] * v[1] + m[8] * v[2];
    out[0] = x, out[1] = y, out[2] = z;
}

static inline void transpose(const double *m, double *out)
{
    double r[9] = {m[0], m[3], m[6], m[1], m[4], m[7], m[2], m[5], m[8]};
    memcpy(out, r, sizeof r);
}

static const double IDENTITY3[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1};

/* Hamilton product a * b; out may alias a or b. */
static inline void quat_multiply(const double a[4], const double b[4], double out[4])
{
    double w = a[0] * b[0] - a[1] * b[1] - a[2] * b[2] - a[3] * b[3];
    double x = a[0] * b[1] + a[1] * b[0] + a[2] * b[3] - a[3] * b[2];
    double y = a[0] * b[2] - a[1] * b[3] + a[2] * b[0] + a[3] * b[1];
    double z = a[0] * b[3] + a[1] * b[2] - a[2] * b[1] + a[3] * b[0];
    out[0] = w, out[1] = x, out[2] = y, out[3] = z;
}

/* The inverse of a unit quaternion (quat.conjugate). */
static inline void quat_conjugate(const double q[4], double out[4])
{
    out[0] = q[0], out[1] = -q[1], out[2] = -q[2], out[3] = -q[3];
}

/* Unit with w >= 0; a zero quaternion becomes identity (quat.normalize). */
static inline void quat_normalize(double *q)
{
    double n = sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3]);
    if (n <= EPS) {
        q[0] = 1.0, q[1] = q[2] = q[3] = 0.0;
        return;
    }
    double s = (q[0] < 0.0 ? -1.0 : 1.0) / n;
    for (int i = 0; i < 4; i++)
        q[i] *= s;
}

/* The homogeneous form, as quat.to_matrix. */
static inline void quat_to_matrix(const double *q, double *m)
{
    double w = q[0], x = q[1], y = q[2], z = q[3];
    m[0] = w * w + x * x - y * y - z * z;
    m[1] = 2.0 * (x * y - w * z);
    m[2] = 2.0 * (x * z + w * y);
    m[3] = 2.0 * (x * y + w * z);
    m[4] = w * w - x * x + y * y - z * z;
    m[5] = 2.0 * (y * z - w * x);
    m[6] = 2.0 * (x * z - w * y);
    m[7] = 2.0 * (y * z + w * x);
    m[8] = w * w - x * x - y * y + z * z;
}

/* The rotation angle in [0, pi] of a unit quaternion (quat.angle). */
static inline double quat_angle(const double *q)
{
    return 2.0 * atan2(sqrt(q[1] * q[1] + q[2] * q[2] + q[3] * q[3]), fabs(q[0]));
}

/* A unit vector perpendicular to v (quat.perpendicular). */
static inline void perpendicular(const double v[3], double out[3])
{
    const double axis[3] = {fabs(v[0]) < 0.9 ? 1.0 : 0.0, fabs(v[0]) < 0.9 ? 0.0 : 1.0, 0.0};
    cross3(v, axis, out);
    double n = sqrt(dot3(out, out));
    if (n > EPS) {
        out[0] /= n, out[1] /= n, out[2] /= n;
    } else {
        out[0] = 0.0, out[1] = 0.0, out[2] = 1.0;
    }
}

/* The smallest rotation taking direction u to direction v (quat.shortest_arc). */
static inline void shortest_arc(const double *u_in, const double *v_in, double *q)
{
    double nu = sqrt(dot3(u_in, u_in)), nv = sqrt(dot3(v_in, v_in));
    if (!(nu > EPS && nv > EPS)) {
        q[0] = 1.0, q[1] = q[2] = q[3] = 0.0;
        return;
    }
    double u[3] = {u_in[0] / nu, u_in[1] / nu, u_in[2] / nu}, v[3] = {v_in[0] / nv, v_in[1] / nv, v_in[2] / nv};
    double d = dot3(u, v);
    if (d < -1.0 + 1e-9) {
        q[0] = 0.0;
        perpendicular(u, q + 1);
    } else {
        q[0] = 1.0 + d;
        cross3(u, v, q + 1);
    }
    quat_normalize(q);
}

/* The rotation vector of a quaternion (polish.rotation_vectors). */
static inline void quat_log(const double *q_in, double *v)
{
    double q[4] = {q_in[0], q_in[1], q_in[2], q_in[3]};
    quat_normalize(q);
    double n = sqrt(q[1] * q[1] + q[2] * q[2] + q[3] * q[3]);
    double s = 2.0 * atan2(n, q[0]) / (n > 1e-15 ? n : 1.0);
    v[0] = s * q[1], v[1] = s * q[2], v[2] = s * q[3];
}

/* The unit quaternion of a rotation vector (anderson._exp). */
static inline void quat_exp(const double *v, double *q)
{
    double n = sqrt(dot3(v, v)), scale = sin(0.5 * n) / (n > EPS ? n : 1.0);
    q[0] = cos(0.5 * n);
    q[1] = v[0] * scale, q[2] = v[1] * scale, q[3] = v[2] * scale;
}

#endif
