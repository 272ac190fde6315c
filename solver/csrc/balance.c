/* Balance's geometry (balance.py: support_of, _hull, Support.depth_and_shift, _pose_centre): the
 * pinned feet's contact points on the ground, the convex hull of the planted ones, the body's
 * centre of mass in a pose and how far it lies inside the hull, asked of a pose in one call
 * (`ewbik_balance_check`, balance._balance_state). Each step mirrors its Python namesake, which
 * runs where the library is missing; a live drag asks every update, where numpy's calls cost
 * more than the arithmetic. */
#include <math.h>
#include <stdlib.h>

#include "loop_state.h"
#include "vecmath.h"

/* np.round(x, 12): points a rounding apart become one corner. (Lengths below are square roots of
 * sums of squares, not hypot: glibc's hypot is versioned newer than the 2.28 Blender runs on.) */
static double rounded(double x) { return nearbyint(x * 1e12) / 1e12; }

static int by_place(const void *a, const void *b)
{
    const double *p = a, *q = b;
    if (p[0] != q[0])
        return p[0] < q[0] ? -1 : 1;
    return p[1] < q[1] ? -1 : p[1] > q[1];
}

/* (o a b) turns left. */
static double turn(const double *o, const double *a, const double *b)
{
    return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0]);
}

/* _half_hull: the chain of `count` sorted points (x, y) from `first` in steps of `step` (1 or -1)
 * that turns left at every corner, appended to out from `m`; its last point left out. */
static int half_hull(const double *points, int count, int first, int step, double *out, int m)
{
    int start = m;
    for (int k = 0, i = first; k < count; k++, i += step) {
        const double *p = points + 2 * i;
        while (m - start >= 2 && !(turn(out + 2 * (m - 2), out + 2 * (m - 1), p) > 0.0))
            m--;
        out[2 * m] = p[0], out[2 * m + 1] = p[1], m++;
    }
    return m - 1;
}

/* _hull of `count` ground points (x, y) sorted in place: the corners, counter-clockwise, into
 * `hull` (room for count + 1); their number. */
static int convex_hull(double *points, int count, double *hull)
{
    qsort(points, (size_t)count, 2 * sizeof(double), by_place);
    int unique = 0;
    for (int i = 0; i < count; i++)
        if (!unique || by_place(points + 2 * i, points + 2 * (unique - 1)) != 0)
            points[2 * unique] = points[2 * i], points[2 * unique + 1] = points[2 * i + 1], unique++;
    if (unique < 3) {
        for (int i = 0; i < 2 * unique; i++)
            hull[i] = points[i];
        return unique;
    }
    int m = half_hull(points, unique, 0, 1, hull, 0);
    return half_hull(points, unique, unique - 1, -1, hull, m);
}

/* balance.support_of: the feet's contact points on the ground, rounded to 1e-12, and the hull of the
 * planted ones (as `ewbik_balance_check` says); the corners' count, -1 when memory ran out. */
static int support(int n_feet, const int *feet, const int *counts, const double *points, const double *axes,
                   const double *places, const double *frame, double planted, double *hull)
{
    int total = 0;
    for (int f = 0; f < n_feet; f++)
        total += counts[f];
    double *ground = malloc(3 * ((size_t)total + 1) * sizeof(double));
    double *flat = malloc(2 * ((size_t)total + 1) * sizeof(double));
    if (!ground || !flat) {
        free(ground), free(flat);
        return -1;
    }
    double lowest = INFINITY;
    for (int f = 0, k = 0; f < n_feet; f++) {
        double turn_matrix[9], on_ground[9], offset[3];
        transpose(axes + 9 * feet[f], turn_matrix);
        matmul(frame, turn_matrix, on_ground);
        matvec(frame, places + 3 * feet[f], offset);
        for (int i = 0; i < counts[f]; i++, k++) {
            double moved[3];
            matvec(on_ground, points + 3 * k, moved);
            for (int c = 0; c < 3; c++)
                ground[3 * k + c] = rounded(moved[c] + offset[c]);
            lowest = fmin(lowest, ground[3 * k + 2]);
        }
    }
    int kept = 0;
    for (int f = 0, k = 0; f < n_feet; f++) {
        double low = INFINITY;
        for (int i = 0; i < counts[f]; i++)
            low = fmin(low, ground[3 * (k + i) + 2]);
        for (int i = 0; i < counts[f]; i++, k++)
            if (low <= lowest + planted)
                flat[2 * kept] = ground[3 * k], flat[2 * kept + 1] = ground[3 * k + 1], kept++;
    }
    int corners = convex_hull(flat, kept, hull);
    free(ground), free(flat);
    return corners;
}

/* balance._pose_centre: the centre of mass of a pose into `com` (3,). */
static void centre_of_mass(int n_order, const int *order, const int *parents, const double *local_rest,
                           const double *local_offset, const double *rotations, const double *locations,
                           const double *masses, const double *centres, double *world, double *head, double *com)
{
    double total = 0.0, sum[3] = {0.0, 0.0, 0.0};
    forward_bones(n_order, order, parents, local_rest, local_offset, rotations, locations, world, head);
    for (int i = 0; i < n_order; i++) {
        int b = order[i];
        double placed[3];
        matvec(world + 9 * b, centres + 3 * b, placed);
        for (int c = 0; c < 3; c++)
            sum[c] += masses[b] * (head[3 * b + c] + placed[c]);
        total += masses[b];
    }
    for (int c = 0; c < 3; c++)
        com[c] = sum[c] / total;
}

/* Support.depth_and_shift: how far `point` (3,) lies inside the `m` corners of `hull` along the
 * ground's `axes` (2, 3) (negative: outside by that much), and into `shift` (3,) the move along
 * the ground to `margin` inside (zero when it is there). */
static double support_depth(int m, const double *hull, const double *axes, const double *point, double margin,
                            double *shift)
{
    double p[2] = {dot3(axes, point), dot3(axes + 3, point)}, near[2] = {p[0], p[1]}, depth = INFINITY;
    for (int i = 0; i < m && m >= 3; i++) {
        const double *a = hull + 2 * i, *b = hull + 2 * ((i + 1) % m);
        double dx = b[0] - a[0], dy = b[1] - a[1], length = sqrt(dx * dx + dy * dy);
        length = length > 0.0 ? length : 1e-300;
        double nx = -dy / length, ny = dx / length;
        depth = fmin(depth, nx * p[0] + ny * p[1] - (nx * a[0] + ny * a[1]));
    }
    if (!(m >= 3 && depth >= 0.0)) {
        double gap = INFINITY;
        for (int i = 0; i < m; i++) {
            const double *a = hull + 2 * i, *b = hull + 2 * ((i + 1) % m);
            double dx = b[0] - a[0], dy = b[1] - a[1], span = fmax(dx * dx + dy * dy, 1e-300);
            double along = fmin(fmax(((p[0] - a[0]) * dx + (p[1] - a[1]) * dy) / span, 0.0), 1.0);
            double qx = a[0] + dx * along, qy = a[1] + dy * along;
            double distance = (qx - p[0]) * (qx - p[0]) + (qy - p[1]) * (qy - p[1]);
            if (distance < gap)
                gap = distance, near[0] = qx, near[1] = qy;
        }
        depth = -sqrt(gap);
    }
    for (int c = 0; c < 3; c++)
        shift[c] = 0.0;
    if (depth >= margin)
        return depth;
    double middle[2] = {0.0, 0.0};
    for (int i = 0; i < m; i++)
        middle[0] += hull[2 * i], middle[1] += hull[2 * i + 1];
    middle[0] /= m, middle[1] /= m;
    double ix = middle[0] - near[0], iy = middle[1] - near[1], length = sqrt(ix * ix + iy * iy);
    double share = length > 0.0 ? fmin(margin, length) / length : 1.0;
    double goal[2] = {near[0] + ix * share, near[1] + iy * share};
    for (int c = 0; c < 3; c++)
        shift[c] = (goal[0] - p[0]) * axes[c] + (goal[1] - p[1]) * axes[3 + c];
    return depth;
}

int ewbik_balance_check(int n_order, const int *order, const int *parents, const double *local_rest,
                        const double *local_offset, const double *rotations, const double *locations,
                        const double *masses, const double *centres, int n_feet, const int *feet, const int *counts,
                        const double *points, const double *axes, const double *places, const double *frame,
                        double planted, double margin, double *world, double *head, double *hull, double *found)
{
    int corners = support(n_feet, feet, counts, points, axes, places, frame, planted, hull);
    if (corners < 0)
        return -1;
    centre_of_mass(n_order, order, parents, local_rest, local_offset, rotations, locations, masses, centres, world,
                   head, found);
    found[6] = support_depth(corners, hull, frame, found, margin, found + 3);
    return corners;
}
