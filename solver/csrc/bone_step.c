/* One bone's step of a sweep (bone_step.solve_batch for one row): the covariance of the pins it
 * solves for, the best turn, dampened and limited, guarded and committed. Each function mirrors
 * its numpy namesake; see those for the reasoning behind every step. */
#include <math.h>
#include <string.h>

#include "loop_state.h"
#include "qcp.h"
#include "vecmath.h"

/* The constraint frame of bone b: its rest frame under its posed parent. */
void parent_frame(const State *st, int b, double *frame)
{
    const ewbik_problem *pb = st->pb;
    int p = pb->parents[b];
    if (p < 0)
        memcpy(frame, pb->local_rest + 9 * b, 9 * sizeof(double));
    else
        matmul(st->world + 9 * p, pb->local_rest + 9 * b, frame);
}

/* What a bone step knows of the pins it solves for, measured from the bone's head
 * (bone_step._Covariance). */
typedef struct {
    double s_origin[9];    /* the pins' origins: sum w_origin e t^T */
    double s_axes[9];      /* the pins' axes: sum w_axis e_a t_a^T */
    double scaled_axes[9]; /* the same axes, each scaled by max(1, |t|^2) (the paper's basis scaling) */
    double sum_e[3], sum_t[3], w_sum;
    double mean_e[3], mean_t[3]; /* weighted means of the effectors and targets (translating roots) */
    double fit;      /* sum w_origin (|e|^2 + |t|^2): the origins' misfit before any turn */
    double axis_fit; /* sum 2 w_axis: the unit axes' misfit before any turn, less 2 tr(s_axes) */
    double e0;       /* the references' estimate of the top eigenvalue */
} Covariance;

/* The covariances of the pins bone step `row` solves for (bone_step._pin_covariance). The sums run
 * in locals, which the compiler keeps in registers. */
static void pin_covariance(const State *st, int row, const double *head, Covariance *cov)
{
    const ewbik_problem *pb = st->pb;
    double s_origin[9] = {0}, s_axes[9] = {0}, scaled_axes[9] = {0};
    double sum_e[3] = {0}, sum_t[3] = {0}, w_sum = 0.0, e0 = 0.0, fit = 0.0, axis_fit = 0.0;
    for (int i = pb->seen_start[row]; i < pb->seen_start[row + 1]; i++) {
        int p = pb->seen_pin[i];
        double w_pin = pb->weight[p] * pb->seen_factor[i], w_axis[3], e[3], t[3];
        double w_origin = w_pin;
        for (int a = 0; a < 3; a++) {
            w_axis[a] = 2.0 * w_pin * pb->axis_weight[3 * p + a];
            w_origin += w_axis[a];
        }
        for (int c = 0; c < 3; c++) {
            e[c] = st->eff_pos[3 * p + c] - head[c];
            t[c] = pb->target_pos[3 * p + c] - head[c];
        }
        double t_len2 = dot3(t, t), stretch = fmax(1.0, t_len2);
        for (int r = 0; r < 3; r++)
            for (int c = 0; c < 3; c++)
                s_origin[3 * r + c] += w_origin * e[r] * t[c];
        for (int a = 0; a < 3; a++) {
            const double *ea = st->eff_axes + 9 * p + 3 * a, *ta = pb->target_axes + 9 * p + 3 * a;
            for (int r = 0; r < 3; r++)
                for (int c = 0; c < 3; c++) {
                    double term = w_axis[a] * ea[r] * ta[c];
                    s_axes[3 * r + c] += term;
                    scaled_axes[3 * r + c] += term * stretch;
                }
            axis_fit += 2.0 * w_axis[a];
            e0 += 2.0 * w_axis[a] * stretch;
        }
        fit += w_origin * (dot3(e, e) + t_len2);
        w_sum += w_origin;
        for (int c = 0; c < 3; c++) {
            sum_e[c] += w_origin * e[c];
            sum_t[c] += w_origin * t[c];
        }
    }
    memcpy(cov->s_origin, s_origin, sizeof s_origin);
    memcpy(cov->s_axes, s_axes, sizeof s_axes);
    memcpy(cov->scaled_axes, scaled_axes, sizeof scaled_axes);
    memcpy(cov->sum_e, sum_e, sizeof sum_e);
    memcpy(cov->sum_t, sum_t, sizeof sum_t);
    cov->w_sum = w_sum, cov->fit = fit, cov->axis_fit = axis_fit, cov->e0 = 0.5 * (fit + e0);
}

/* A translating root's rotation is fitted about the weighted means (bone_step._centre_translation). */
static void centre_translation(Covariance *cov)
{
    double w_sum = fmax(cov->w_sum, 1e-300);
    for (int c = 0; c < 3; c++) {
        cov->mean_e[c] = cov->sum_e[c] / w_sum;
        cov->mean_t[c] = cov->sum_t[c] / w_sum;
    }
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 3; c++)
            cov->s_origin[3 * r + c] -= w_sum * (cov->mean_e[r] * cov->mean_t[c]);
}

/* The best world turn about the head: QCP on the scaled covariance (bone_step._fit_rotation). */
static void fit_rotation(const ewbik_problem *pb, const Covariance *cov, double *delta)
{
    double s_scaled[9];
    for (int i = 0; i < 9; i++)
        s_scaled[i] = cov->scaled_axes[i] + cov->s_origin[i];
    qcp_rotation_from_covariance(s_scaled, pb->prefer_small, pb->adjugate_trust, !pb->exact, cov->e0, delta);
}

/* bone_step._clamp_angle for one rotation. */
static void clamp_angle(double *q, double max_angle, double relaxation)
{
    quat_normalize(q);
    if (relaxation == 1.0 && q[0] >= cos(0.5 * max_angle))
        return;
    double norm = sqrt(q[1] * q[1] + q[2] * q[2] + q[3] * q[3]);
    double half = fmin(atan2(norm, q[0]) * relaxation, 0.5 * max_angle);
    double scale = sin(half) / (norm > 1e-15 ? norm : 1.0);
    q[0] = cos(half);
    for (int i = 1; i < 4; i++)
        q[i] *= scale;
}

/* The turn over-relaxed and cut to the bone's dampening; a cut marks the sweep (bone_step._dampen_turn). */
static void dampen_turn(State *st, int b, int translating, double *delta)
{
    const ewbik_problem *pb = st->pb;
    if (!translating)
        st->capped |= pb->relaxation * quat_angle(delta) > pb->max_step[b];
    clamp_angle(delta, translating ? PI : pb->max_step[b], translating ? 1.0 : pb->relaxation);
}

/* The bone's local rotation after the world turn (bone_step._turn_locally). */
static void turn_locally(const double *frame, const double *delta, const double *old_local, double *new_local)
{
    double local_delta[4];
    local_delta[0] = delta[0];
    matvec_t(frame, delta + 1, local_delta + 1);
    quat_multiply(local_delta, old_local, new_local);
}

/* The new local rotation held to the bone's limits, and the world turn it now amounts to
 * (bone_step._apply_limits). */
static void apply_limits(const ewbik_problem *pb, int b, const double *frame, const double *old_local, int iteration,
                         double *new_local, double *delta)
{
    double inverse[4], local_delta[4];
    quat_conjugate(old_local, inverse);
    ewbik_constrain(pb->limits, b, new_local, iteration);
    quat_normalize(new_local);
    quat_multiply(new_local, inverse, local_delta);
    delta[0] = local_delta[0];
    matvec(frame, local_delta + 1, delta + 1);
}

/* A translating root's shift: the targets' mean less the turned effectors' mean (bone_step._root_shift). */
static void root_shift(const Covariance *cov, const double *turn, double *shift)
{
    double turned[3];
    matvec(turn, cov->mean_e, turned);
    for (int c = 0; c < 3; c++)
        shift[c] = cov->mean_t[c] - turned[c];
}

/* The stabilization guard: a step that worsens the misfit of the bone's own pins beyond rounding
 * is undone (bone_step._guard_step). */
static void guard_step(const ewbik_problem *pb, const Covariance *cov, const double *old_local, double *turn,
                       double *new_local, double *shift)
{
    double guard[9], trace, gain = 0.0;
    for (int i = 0; i < 9; i++)
        guard[i] = cov->s_origin[i] + cov->s_axes[i];
    trace = guard[0] + guard[4] + guard[8];
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 3; c++)
            gain += turn[3 * r + c] * guard[3 * c + r];
    gain -= trace;
    double before = cov->fit + cov->axis_fit - 2.0 * trace;
    if (-2.0 * gain > pb->guard_slack * fabs(before) + pb->guard_floor) {
        memcpy(turn, IDENTITY3, 9 * sizeof(double));
        memcpy(new_local, old_local, 4 * sizeof(double));
        shift[0] = shift[1] = shift[2] = 0.0;
    }
}

/* The step written: the bone's rotation, the pins it carries turned about its head and shifted,
 * a translating root's location (bone_step._commit_step). */
static void commit_step(State *st, int row, const double *frame, const double *new_local, const double *turn,
                        const double *shift)
{
    const ewbik_problem *pb = st->pb;
    int b = pb->batch_bones[row];
    const double *head = st->head + 3 * b;
    memcpy(pb->rotations + 4 * b, new_local, 4 * sizeof(double));
    for (int i = pb->moved_start[row]; i < pb->moved_start[row + 1]; i++) {
        int m = pb->moved_pin[i];
        double *pos = st->eff_pos + 3 * m, rel[3];
        for (int c = 0; c < 3; c++)
            rel[c] = pos[c] - head[c];
        matvec(turn, rel, rel);
        for (int c = 0; c < 3; c++)
            pos[c] = head[c] + rel[c] + shift[c];
        for (int a = 0; a < 3; a++)
            matvec(turn, st->eff_axes + 9 * m + 3 * a, st->eff_axes + 9 * m + 3 * a);
    }
    if (pb->translating[row]) {
        double local_shift[3];
        matvec_t(frame, shift, local_shift);
        for (int c = 0; c < 3; c++)
            pb->locations[3 * b + c] += local_shift[c];
    }
}

/* One EWBIK bone step (bone_step.solve_batch for one row, the same steps); `limited_batch`: whether
 * a bone of the row's batch has limits (numpy then normalizes every new rotation of the batch). */
void solve_bone_step(State *st, int row, int iteration, int limited_batch)
{
    const ewbik_problem *pb = st->pb;
    int b = pb->batch_bones[row], translating = pb->translating[row];
    const double *head = st->head + 3 * b;
    double frame[9], delta[4], old_local[4], new_local[4], turn[9], shift[3] = {0, 0, 0};
    Covariance cov;
    parent_frame(st, b, frame);
    pin_covariance(st, row, head, &cov);
    if (translating)
        centre_translation(&cov);
    fit_rotation(pb, &cov, delta);
    dampen_turn(st, b, translating, delta);
    memcpy(old_local, pb->rotations + 4 * b, sizeof old_local);
    turn_locally(frame, delta, old_local, new_local);
    if (limited_batch)
        apply_limits(pb, b, frame, old_local, iteration, new_local, delta);
    quat_to_matrix(delta, turn);
    if (translating)
        root_shift(&cov, turn, shift);
    if (pb->stabilization > 0)
        guard_step(pb, &cov, old_local, turn, new_local, shift);
    commit_step(st, row, frame, new_local, turn, shift);
}

/* Limit and normalize a jump proposal q for bone b (an extrapolation or a limb placement);
 * returns whether it ends farther from the warm start than allowance_scale dampening steps. */
int settle(const ewbik_problem *pb, int b, double *q, double allowance_scale)
{
    double inverse[4], relative[4];
    quat_conjugate(pb->initial + 4 * b, inverse);
    if (pb->limits)
        ewbik_constrain(pb->limits, b, q, 0);
    quat_normalize(q);
    quat_multiply(inverse, q, relative);
    return quat_angle(relative) > allowance_scale * pb->max_step[b] + 1e-12;
}
