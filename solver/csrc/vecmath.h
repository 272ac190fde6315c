/* Vector and quaternion (w, x, y, z; Hamilton) helpers shared by the C files. */
#ifndef EWBIK_VECMATH_H
#define EWBIK_VECMATH_H

#include <math.h>

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

/* Hamilton product a * b; out may alias a or b. */
static inline void quat_multiply(const double a[4], const double b[4], double out[4])
{
    double w = a[0] * b[0] - a[1] * b[1] - a[2] * b[2] - a[3] * b[3];
    double x = a[0] * b[1] + a[1] * b[0] + a[2] * b[3] - a[3] * b[2];
    double y = a[0] * b[2] - a[1] * b[3] + a[2] * b[0] + a[3] * b[1];
    double z = a[0] * b[3] + a[1] * b[2] - a[2] * b[1] + a[3] * b[0];
    out[0] = w, out[1] = x, out[2] = y, out[3] = z;
}

/* A unit vector perpendicular to v (quat.perpendicular). */
static inline void perpendicular(const double v[3], double out[3])
{
    const double axis[3] = {fabs(v[0]) < 0.9 ? 1.0 : 0.0, fabs(v[0]) < 0.9 ? 0.0 : 1.0, 0.0};
    cross3(v, axis, out);
    double n = sqrt(dot3(out, out));
    if (n > 1e-12) {
        out[0] /= n, out[1] /= n, out[2] /= n;
    } else {
        out[0] = 0.0, out[1] = 0.0, out[2] = 1.0;
    }
}

#endif
