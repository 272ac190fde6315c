/* Kusudama joint-limit clamp for one bone: a port of JointLimits.constrain in
 * solver/kusudama.py (comfort pull, swing clamp, twist clamp) that follows the numpy
 * formulas and thresholds step by step, so both agree to rounding. */
#include <math.h>

#include "kusudama.h"
#include "vecmath.h"

/* Numeric guards for degenerate vectors, not tuning constants (those come in ewbik_limits):
 * the same literals the numpy code writes in kusudama._unit and kusudama._swing_to. */
#define UNIT_EPS 1e-12        /* shorter vectors take their fallback instead of normalizing */
#define OPPOSITE_EPS 1e-9     /* _swing_to: 1 + cos below this is a half turn */

/* v / |v| in place, or `fallback` when |v| <= 1e-12 (kusudama._unit). */
static inline void unit3(double v[3], const double fallback[3])
{
    double n = sqrt(dot3(v, v));
    for (int i = 0; i < 3; i++)
        v[i] = n > UNIT_EPS ? v[i] / n : fallback[i];
}

/* +Y turned by the unit quaternion q (_swing_direction). */
static inline void swing_direction(const double q[4], double out[3])
{
    out[0] = 2.0 * (q[1] * q[2] - q[0] * q[3]);
    out[1] = q[0] * q[0] - q[1] * q[1] + q[2] * q[2] - q[3] * q[3];
    out[2] = 2.0 * (q[2] * q[3] + q[0] * q[1]);
}

/* q = (shortest arc from unit `current` to `wanted`) * q (_swing_to). */
static void swing_to(double q[4], const double current[3], const double wanted[3])
{
    double arc[4] = {1.0 + dot3(current, wanted)};
    if (arc[0] < OPPOSITE_EPS) {
        arc[0] = 0.0;
        perpendicular(current, arc + 1);
    } else {
        cross3(current, wanted, arc + 1);
    }
    double n = sqrt(arc[0] * arc[0] + arc[1] * arc[1] + arc[2] * arc[2] + arc[3] * arc[3]);
    for (int i = 0; i < 4; i++)
        arc[i] /= n;
    quat_multiply(arc, q, q);
}

/* q = q * (rotation by `angle` about +Y) (_about_y). */
static inline void about_y(double q[4], double angle)
{
    double c = cos(0.5 * angle), s = sin(0.5 * angle);
    double w = c * q[0] - s * q[2], x = c * q[1] - s * q[3];
    double y = c * q[2] + s * q[0], z = c * q[3] + s * q[1];
    q[0] = w, q[1] = x, q[2] = y, q[3] = z;
}

/* The w and y components of f^-1 * q: the twist of q about +Y relative to the twist frame f. */
static inline void twist_parts(const double f[4], const double q[4], double *w, double *y)
{
    *w = f[0] * q[0] + f[1] * q[1] + f[2] * q[2] + f[3] * q[3];
    *y = -f[2] * q[0] - f[3] * q[1] + f[0] * q[2] + f[1] * q[3];
}

/* The twist angle of `twist_parts` w and y, in [-pi, pi], with the sign making w >= 0. */
static inline double twist_angle(double w, double y)
{
    return 2.0 * atan2(w < 0.0 ? -y : y, fabs(w));
}

/* Twist of q about +Y relative to the twist frame f (_Packed.twist_offset). */
static inline double twist_offset(const double f[4], const double q[4])
{
    double w, y;
    twist_parts(f, q, &w, &y);
    return twist_angle(w, y);
}

/* Whether p lies beyond one of a tangent cone's three triangle planes (rows of `planes`;
 * all zero for a cone, which never excludes). */
static inline int outside_triangle(const double planes[9], const double p[3], double slack)
{
    return dot3(planes, p) < -slack || dot3(planes + 3, p) < -slack || dot3(planes + 6, p) < -slack;
}

/* The nearest allowed direction of unit p into `out` (_Packed.closest for one bone);
 * returns 1, leaving `out` alone, when p is already inside (the first region within
 * `inside_tolerance` ends the search). Each region's distance is sign * (angle to centre -
 * radius); a region that is off or whose triangle excludes p does not count, and the first of
 * equal minima wins (numpy argmin). */
static int closest(const ewbik_limits *l, int bone, const double p[3], double out[3])
{
    int best = 0;
    double best_dist = INFINITY, best_dot = 0.0;
    for (int r = 0; r < l->n_regions; r++) {
        int i = bone * l->n_regions + r;
        if (!l->on[i] || outside_triangle(l->planes + 9 * i, p, l->plane_tolerance))
            continue;
        const double *c = l->centres + 3 * i;
        double cp[3], d = dot3(c, p);
        if (l->sign[i] * (d - l->inside_cos[i]) >= 0.0)
            return 1; /* surely inside (native_limits): the angle below would say so too */
        cross3(p, c, cp);
        double dist = l->sign[i] * (atan2(sqrt(dot3(cp, cp)), d) - l->radii[i]);
        if (dist <= l->inside_tolerance)
            return 1; /* inside: no later region can change that */
        if (dist < best_dist)
            best = r, best_dist = dist, best_dot = d;
    }
    int i = bone * l->n_regions + best;
    const double *c = l->centres + 3 * i;
    double off[3], radius = l->radii[i];
    for (int k = 0; k < 3; k++)
        off[k] = p[k] - best_dot * c[k];
    unit3(off, l->fallback + 3 * i);
    for (int k = 0; k < 3; k++)
        out[k] = cos(radius) * c[k] + sin(radius) * off[k];
    double n = sqrt(dot3(out, out)); /* back to unit: a fallback may be a hair off the plane */
    for (int k = 0; k < 3; k++)
        out[k] /= n;
    return 0;
}

/* Soft limit (JointLimits._comfort): turn the swing toward the region's centre and the
 * twist toward the middle of its range by `fraction`. */
static void comfort(const ewbik_limits *l, int bone, double q[4], double fraction)
{
    if (l->swing_on[bone]) {
        const double *centre = l->centre + 3 * bone;
        double current[3], cc[3], off[3], pulled[3], fallback[3];
        swing_direction(q, current);
        cross3(current, centre, cc);
        double d = dot3(centre, current), angle = fraction * atan2(sqrt(dot3(cc, cc)), d);
        for (int k = 0; k < 3; k++)
            off[k] = centre[k] - d * current[k];
        perpendicular(current, fallback);
        unit3(off, fallback);
        for (int k = 0; k < 3; k++)
            pulled[k] = cos(angle) * current[k] + sin(angle) * off[k];
        swing_to(q, current, pulled);
    }
    if (l->twist_on[bone])
        about_y(q, -fraction * twist_offset(l->twist_frame + 4 * bone, q));
}

void ewbik_constrain(const ewbik_limits *limits, int bone, double q[4], int iteration)
{
    if (!limits->limited[bone])
        return;
    double fraction = limits->comfort_rate * limits->comfort[bone];
    for (int i = 0; i < iteration; i++)
        fraction *= limits->comfort_decay;
    if (fraction > 0.0)
        comfort(limits, bone, q, fraction);
    if (limits->swing_on[bone]) {
        double current[3], wanted[3];
        swing_direction(q, current);
        if (!closest(limits, bone, current, wanted))
            swing_to(q, current, wanted);
    }
    if (limits->twist_on[bone]) {
        double w, y;
        twist_parts(limits->twist_frame + 4 * bone, q, &w, &y);
        if (fabs(y) <= fabs(w) * limits->twist_tan[bone])
            return; /* surely within the range (native_limits): the offset below would say so too */
        double offset = twist_angle(w, y);
        double half = limits->twist_half[bone];
        double excess = offset > half ? offset - half : offset < -half ? offset + half : 0.0;
        if (excess != 0.0)
            about_y(q, -excess);
    }
}

void ewbik_constrain_batch(const ewbik_limits *limits, int k, const int *bones, double *rotations,
                          int iteration)
{
    for (int j = 0; j < k; j++)
        ewbik_constrain(limits, bones[j], rotations + 4 * j, iteration);
}
