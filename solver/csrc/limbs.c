/* The analytic finish of two-bone limbs (limbs.finish_limbs with two_bone.two_bone_ik): each
 * limb placed exactly where the iterations leave it short, kept only where its pin gets closer.
 * Each function mirrors its numpy namesake; see those for the reasoning behind every step. */
#include <math.h>
#include <string.h>

#include "loop_state.h"
#include "qcp.h"
#include "vecmath.h"

/* Joint and end of a limb reaching from `root` toward `target`, its joint bent toward `bend`
 * (two_bone.two_bone_ik). */
static void two_bone_ik(const double *root, const double *target, double r1, double r2, const double *bend,
                        double *joint, double *tip)
{
    double p[3], direction[3], side[3];
    for (int c = 0; c < 3; c++)
        p[c] = target[c] - root[c];
    double dist = sqrt(dot3(p, p));
    if (dist > EPS) {
        for (int c = 0; c < 3; c++)
            direction[c] = p[c] / dist;
    } else {
        perpendicular(bend, direction);
    }
    double reach = fmin(fmax(dist, fabs(r1 - r2)), r1 + r2);
    for (int c = 0; c < 3; c++)
        p[c] = direction[c] * reach;
    double h = reach * reach, w = h + r1 * r1 - r2 * r2, s = sqrt(fmax(4.0 * r1 * r1 * h - w * w, 0.0));
    double along = dot3(bend, direction);
    for (int c = 0; c < 3; c++)
        side[c] = bend[c] - along * direction[c];
    double side_len = sqrt(dot3(side, side));
    if (side_len > EPS) {
        for (int c = 0; c < 3; c++)
            side[c] /= side_len;
    } else {
        perpendicular(direction, side);
    }
    for (int c = 0; c < 3; c++) {
        joint[c] = root[c] + (h > 1e-24 ? (w * p[c] + s * sqrt(h) * side[c]) * 0.5 / h : r1 * side[c]);
        tip[c] = root[c] + p[c];
    }
}

/* The side stuck limb l's joint may bend to (limbs.allowed_bends): opposite to where the
 * centre of the lower bone's allowed swings tilts it from the upper bone; the upper bone's
 * direction where that centre shows no tilt. */
static void allowed_bend(State *st, int l, double *bend)
{
    const ewbik_problem *pb = st->pb;
    int upper = pb->limbs[4 * l], lower = pb->limbs[4 * l + 1];
    for (int c = 0; c < 3; c++)
        bend[c] = st->head[3 * lower + c] - st->head[3 * upper + c];
    double length = sqrt(dot3(bend, bend));
    for (int c = 0; c < 3; c++)
        bend[c] /= length;
    double frame[9], allowed[3], tilt[3];
    parent_frame(st, lower, frame);
    matvec(frame, pb->limits->centre + 3 * lower, allowed);
    double along = dot3(allowed, bend);
    for (int c = 0; c < 3; c++)
        tilt[c] = allowed[c] - along * bend[c];
    if (sqrt(dot3(tilt, tilt)) > pb->bend_tilt)
        for (int c = 0; c < 3; c++)
            bend[c] = -tilt[c];
}

/* New local rotations (upper, lower, end) placing limb l exactly, its joint bent toward `bend`
 * (NULL: the side it is bent to now); returns whether a bone would travel farther than the
 * dampening allows. */
static int place_limb(State *st, int l, double allowance_scale, const double *bend, double *out)
{
    const ewbik_problem *pb = st->pb;
    const int *limb = pb->limbs + 4 * l;
    int upper = limb[0], lower = limb[1], end = limb[2], pin = limb[3];
    const double *head_u = st->head + 3 * upper, *head_l = st->head + 3 * lower, *head_e = st->head + 3 * end;
    double upper_vec[3], lower_vec[3], joint[3], tip[3], to_joint[3], to_tip[3];
    for (int c = 0; c < 3; c++) {
        upper_vec[c] = head_l[c] - head_u[c];
        lower_vec[c] = head_e[c] - head_l[c];
    }
    two_bone_ik(head_u, pb->target_pos + 3 * pin, sqrt(dot3(upper_vec, upper_vec)), sqrt(dot3(lower_vec, lower_vec)),
                bend ? bend : upper_vec, joint, tip);
    for (int c = 0; c < 3; c++) {
        to_joint[c] = joint[c] - head_u[c];
        to_tip[c] = tip[c] - joint[c];
    }
    double turn_u[4], turn_l[4], arc[4], turned_lower[3], m_u[9], m_l[9];
    shortest_arc(upper_vec, to_joint, turn_u);
    quat_to_matrix(turn_u, m_u);
    matvec(m_u, lower_vec, turned_lower);
    shortest_arc(turned_lower, to_tip, arc);
    quat_multiply(arc, turn_u, turn_l);
    quat_to_matrix(turn_l, m_l);
    double world_u[9], world_l[9], world_e[9], cov[9] = {0};
    matmul(m_u, st->world + 9 * upper, world_u);
    matmul(m_l, st->world + 9 * lower, world_l);
    matmul(m_l, st->world + 9 * end, world_e);
    for (int a = 0; a < 3; a++)
        for (int r = 0; r < 3; r++)
            for (int c = 0; c < 3; c++)
                cov[3 * r + c] += pb->axis_weight[3 * pin + a] * world_e[3 * r + a] * pb->target_axes[9 * pin + 3 * a + c];
    if (!pb->frozen[end]) {
        double turn_e[4], m_e[9];
        qcp_rotation_from_covariance(cov, pb->prefer_small, pb->adjugate_trust, 0, 0.0, turn_e);
        quat_to_matrix(turn_e, m_e);
        matmul(m_e, world_e, world_e);
    }
    double frames[27];
    parent_frame(st, upper, frames);
    matmul(world_u, pb->local_rest + 9 * lower, frames + 9);
    matmul(world_l, pb->local_rest + 9 * end, frames + 18);
    const double *worlds[3] = {world_u, world_l, world_e};
    int too_far = 0;
    for (int i = 0; i < 3; i++) {
        int b = limb[i];
        double local[9], *q = out + 4 * i;
        matmul_tn(frames + 9 * i, worlds[i], local);
        quat_from_matrix(local, pb->adjugate_trust, q);
        too_far |= settle(pb, b, q, allowance_scale);
    }
    return too_far;
}

/* Whether limb l's joint is limited, the limb straight though its target asks for more bend,
 * and its pin missed (limbs.stuck_limbs): where a stalled polish tries the finish. */
static int stuck(const State *st, int l)
{
    const ewbik_problem *pb = st->pb;
    const int *limb = pb->limbs + 4 * l;
    if (!pb->limits || !pb->limits->limited[limb[1]])
        return 0;
    double upper[3], lower[3], normal[3];
    for (int c = 0; c < 3; c++) {
        upper[c] = st->head[3 * limb[1] + c] - st->head[3 * limb[0] + c];
        lower[c] = st->head[3 * limb[2] + c] - st->head[3 * limb[1] + c];
    }
    cross3(upper, lower, normal);
    double upper_sq = dot3(upper, upper), lower_sq = dot3(lower, lower), to_target[3];
    for (int c = 0; c < 3; c++)
        to_target[c] = pb->target_pos[3 * limb[3] + c] - st->head[3 * limb[0] + c];
    int straight = dot3(normal, normal) < pb->straight_sine * pb->straight_sine * upper_sq * lower_sq;
    double lengths = sqrt(upper_sq) + sqrt(lower_sq);
    return straight && sqrt(dot3(to_target, to_target)) < lengths * pb->straight_reach
           && !pin_reached(st, limb[3], pb->tolerance);
}

/* Place every limb, keep each only if its pin got no farther and no bone travelled too far
 * (limbs.finish_limbs). Each joint bends to the side it is bent to now; with `stuck_only` only the stuck limbs are
 * placed, each bent to its limits' side. */
void finish_limbs(State *st, double allowance_scale, int stuck_only)
{
    const ewbik_problem *pb = st->pb;
    for (int l = 0; l < pb->n_limbs; l++) {
        double bend[3];
        if (stuck_only && !stuck(st, l)) {
            for (int i = 0; i < 3; i++)
                memcpy(st->limb_new + 12 * l + 4 * i, pb->rotations + 4 * pb->limbs[4 * l + i], 4 * sizeof(double));
            st->limb_bad[l] = 0;
            st->limb_before[l] = INFINITY;
            continue;
        }
        if (stuck_only)
            allowed_bend(st, l, bend);
        st->limb_bad[l] = (unsigned char)place_limb(st, l, allowance_scale, stuck_only ? bend : NULL,
                                                    st->limb_new + 12 * l);
        st->limb_before[l] = pin_cost(st, pb->limbs[4 * l + 3]);
    }
    for (int l = 0; l < pb->n_limbs; l++)
        for (int i = 0; i < 3; i++) {
            double *rotation = pb->rotations + 4 * pb->limbs[4 * l + i];
            memcpy(st->limb_old + 12 * l + 4 * i, rotation, 4 * sizeof(double));
            memcpy(rotation, st->limb_new + 12 * l + 4 * i, 4 * sizeof(double));
        }
    forward(st);
    int restored = 0;
    for (int l = 0; l < pb->n_limbs; l++) {
        if (!(pin_cost(st, pb->limbs[4 * l + 3]) > st->limb_before[l] || st->limb_bad[l]))
            continue;
        restored = 1;
        for (int i = 0; i < 3; i++)
            memcpy(pb->rotations + 4 * pb->limbs[4 * l + i], st->limb_old + 12 * l + 4 * i, 4 * sizeof(double));
    }
    if (restored)
        forward(st);
}

/* Whether some limb is stuck. */
int any_stuck(const State *st)
{
    for (int l = 0; l < st->pb->n_limbs; l++)
        if (stuck(st, l))
            return 1;
    return 0;
}

/* Whether every pin that does not end a limb is within tolerance. */
int others_reached(const State *st)
{
    const ewbik_problem *pb = st->pb;
    for (int p = 0; p < pb->n_pins; p++) {
        int limb_pin = 0;
        for (int l = 0; l < pb->n_limbs && !limb_pin; l++)
            limb_pin = pb->limbs[4 * l + 3] == p;
        if (!limb_pin && !pin_reached(st, p, pb->tolerance))
            return 0;
    }
    return 1;
}
