/* EWBIK iterations in C. Each function mirrors its numpy namesake in solver/solve.py,
 * qcp.py, quat.py and two_bone.py; see those for the reasoning behind every step. */
#define _POSIX_C_SOURCE 199309L
#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "ewbik.h"
#include "qcp.h"
#include "vecmath.h"

#if defined(_WIN32)
#include <windows.h>
static double now_seconds(void)
{
    LARGE_INTEGER count, frequency;
    QueryPerformanceCounter(&count);
    QueryPerformanceFrequency(&frequency);
    return (double)count.QuadPart / (double)frequency.QuadPart;
}
#else
#include <time.h>
static double now_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}
#endif

#define ROUNDING (16 * DBL_EPSILON) /* polish.ROUNDING: relative change of a sum of misfits that rounding alone makes */

/* solve._clamp_angle for one rotation. */
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

/* ---- the solve state ---- */

typedef struct {
    const ewbik_problem *pb;
    void *block;          /* the one allocation every array below lives in */
    double *world;        /* (n, 9) */
    double *head;         /* (n, 3) */
    double *eff_pos;      /* (P, 3) */
    double *eff_axes;     /* (P, 9) rows: the pinned bone's axes */
    /* Anderson history and scratch */
    int history;
    int dims;
    double *inputs, *outputs, *start, *guess, *saved, *columns, *svd_v, *sigma, *gamma;
    /* limb finish scratch */
    double *limb_new;     /* (L, 3, 4) */
    double *limb_old;     /* (L, 3, 4) */
    double *limb_before;  /* (L,) */
    unsigned char *limb_bad;
    int capped;           /* whether a bone step of the current sweep was cut to its dampening */
} State;

/* World rotation matrices (row-major 3x3) and heads of the bones in `order` (parents first). */
static void forward_bones(int n_order, const int *order, const int *parents, const double *local_rest,
                          const double *local_offset, const double *rotations, const double *locations,
                          double *world, double *head)
{
    for (int i = 0; i < n_order; i++) {
        int b = order[i], p = parents[b];
        double rot[9], local[9], offset[3];
        quat_to_matrix(rotations + 4 * b, rot);
        matmul(local_rest + 9 * b, rot, local);
        matvec(local_rest + 9 * b, locations + 3 * b, offset);
        for (int c = 0; c < 3; c++)
            offset[c] += local_offset[3 * b + c];
        if (p < 0) {
            memcpy(world + 9 * b, local, sizeof local);
            memcpy(head + 3 * b, offset, sizeof offset);
        } else {
            double moved[3];
            matmul(world + 9 * p, local, world + 9 * b);
            matvec(world + 9 * p, offset, moved);
            for (int c = 0; c < 3; c++)
                head[3 * b + c] = head[3 * p + c] + moved[c];
        }
    }
}

int ewbik_forward(int n_order, const int *order, const int *parents, const double *local_rest,
                  const double *local_offset, const double *rotations, const double *locations, double *world,
                  double *head)
{
    forward_bones(n_order, order, parents, local_rest, local_offset, rotations, locations, world, head);
    return 0;
}

static void forward(State *st)
{
    const ewbik_problem *pb = st->pb;
    forward_bones(pb->n_kinematic, pb->kinematic, pb->parents, pb->local_rest, pb->local_offset, pb->rotations,
                  pb->locations, st->world, st->head);
    for (int p = 0; p < pb->n_pins; p++) {
        int b = pb->pin_bone[p];
        memcpy(st->eff_pos + 3 * p, st->head + 3 * b, 3 * sizeof(double));
        transpose(st->world + 9 * b, st->eff_axes + 9 * p);
    }
}

/* Squared position error and squared chord of each axis of pin p. */
static double squared_errors(const State *st, int p, double *axis2)
{
    const ewbik_problem *pb = st->pb;
    double pos2 = 0.0;
    for (int c = 0; c < 3; c++) {
        double d = st->eff_pos[3 * p + c] - pb->target_pos[3 * p + c];
        pos2 += d * d;
    }
    for (int a = 0; a < 3; a++) {
        axis2[a] = 0.0;
        for (int c = 0; c < 3; c++) {
            double d = st->eff_axes[9 * p + 3 * a + c] - pb->target_axes[9 * p + 3 * a + c];
            axis2[a] += d * d;
        }
    }
    return pos2;
}

/* The seven-point misfit of pin p (_State.pin_costs). */
static double pin_cost(const State *st, int p)
{
    const double *w = st->pb->axis_weight + 3 * p;
    double axis2[3], pos2 = squared_errors(st, p, axis2);
    return (1.0 + 2.0 * (w[0] + w[1] + w[2])) * pos2 + 2.0 * (w[0] * axis2[0] + w[1] * axis2[1] + w[2] * axis2[2]);
}

static int pin_reached(const State *st, int p, double tolerance)
{
    const ewbik_problem *pb = st->pb;
    if (pb->weight[p] <= 0.0)
        return 1;
    double axis2[3], tol2 = tolerance * tolerance;
    /* Written as !(x <= tol2) so that a NaN error never counts as reached. */
    if (!(squared_errors(st, p, axis2) <= tol2))
        return 0;
    for (int a = 0; a < 3; a++)
        if (!(axis2[a] <= tol2) && pb->axis_weight[3 * p + a] > 0.0)
            return 0;
    return 1;
}

/* Total weighted misfit; *reached says whether every pin is within tolerance. */
static double total_errors(const State *st, int *reached)
{
    const ewbik_problem *pb = st->pb;
    double total = 0.0;
    *reached = 1;
    for (int p = 0; p < pb->n_pins; p++) {
        total += pb->weight[p] * pin_cost(st, p);
        if (!pin_reached(st, p, pb->tolerance))
            *reached = 0;
    }
    return total;
}

/* The constraint frame of bone b: its rest frame under its posed parent. */
static void parent_frame(const State *st, int b, double *frame)
{
    const ewbik_problem *pb = st->pb;
    int p = pb->parents[b];
    if (p < 0)
        memcpy(frame, pb->local_rest + 9 * b, 9 * sizeof(double));
    else
        matmul(st->world + 9 * p, pb->local_rest + 9 * b, frame);
}

/* Whether any bone of the batch has limits: numpy then normalizes every new rotation of it. */
static int batch_limited(const ewbik_problem *pb, int batch)
{
    if (!pb->limits)
        return 0;
    for (int row = pb->batch_start[batch]; row < pb->batch_start[batch + 1]; row++)
        if (pb->limits->limited[pb->batch_bones[row]])
            return 1;
    return 0;
}

/* What a bone step knows of the pins it solves for, measured from the bone's head
 * (solve._Covariance). */
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

/* The covariances of the pins bone step `row` solves for (solve._pin_covariance). The sums run
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

/* A translating root's rotation is fitted about the weighted means (solve._centre_translation). */
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

/* The best world turn about the head: QCP on the scaled covariance (solve._fit_rotation). */
static void fit_rotation(const ewbik_problem *pb, const Covariance *cov, double *delta)
{
    double s_scaled[9];
    for (int i = 0; i < 9; i++)
        s_scaled[i] = cov->scaled_axes[i] + cov->s_origin[i];
    qcp_rotation_from_covariance(s_scaled, pb->prefer_small, pb->adjugate_trust, !pb->exact, cov->e0, delta);
}

/* The turn over-relaxed and cut to the bone's dampening; a cut marks the sweep (solve._dampen_turn). */
static void dampen_turn(State *st, int b, int translating, double *delta)
{
    const ewbik_problem *pb = st->pb;
    if (!translating)
        st->capped |= pb->relaxation * quat_angle(delta) > pb->max_step[b];
    clamp_angle(delta, translating ? PI : pb->max_step[b], translating ? 1.0 : pb->relaxation);
}

/* The bone's local rotation after the world turn (solve._turn_locally). */
static void turn_locally(const double *frame, const double *delta, const double *old_local, double *new_local)
{
    double local_delta[4];
    local_delta[0] = delta[0];
    matvec_t(frame, delta + 1, local_delta + 1);
    quat_multiply(local_delta, old_local, new_local);
}

/* The new local rotation held to the bone's limits, and the world turn it now amounts to
 * (solve._apply_limits). */
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

/* A translating root's shift: the targets' mean less the turned effectors' mean (solve._root_shift). */
static void root_shift(const Covariance *cov, const double *turn, double *shift)
{
    double turned[3];
    matvec(turn, cov->mean_e, turned);
    for (int c = 0; c < 3; c++)
        shift[c] = cov->mean_t[c] - turned[c];
}

/* The stabilization guard: a step that worsens the misfit of the bone's own pins beyond rounding
 * is undone (solve._guard_step). */
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
 * a translating root's location (solve._commit_step). */
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

/* One EWBIK bone step (solve._solve_batch for one row, the same steps); `limited_batch` from
 * batch_limited. */
static void solve_bone_step(State *st, int row, int iteration, int limited_batch)
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
static int settle(const ewbik_problem *pb, int b, double *q, double allowance_scale)
{
    double inverse[4], relative[4];
    quat_conjugate(pb->initial + 4 * b, inverse);
    if (pb->limits)
        ewbik_constrain(pb->limits, b, q, 0);
    quat_normalize(q);
    quat_multiply(inverse, q, relative);
    return quat_angle(relative) > allowance_scale * pb->max_step[b] + 1e-12;
}

/* ---- Anderson acceleration (solve._Anderson) ---- */

static void pose_vector(const State *st, double *out)
{
    const ewbik_problem *pb = st->pb;
    for (int i = 0; i < pb->n_solved; i++) {
        int b = pb->solved[i];
        quat_log(pb->rotations + 4 * b, out + 6 * i);
        memcpy(out + 6 * i + 3, pb->locations + 3 * b, 3 * sizeof(double));
    }
}

/* Least squares min |A g - r| for A (dims x k, column-major in `columns`, destroyed) by a
 * one-sided Jacobi SVD, dropping singular values below 1e-10 of the largest (numpy's lstsq
 * rcond). `v` is k x k scratch, `sigma` k. */
static void least_squares(double *columns, int dims, int k, const double *r, double *v, double *sigma, double *g)
{
    for (int i = 0; i < k * k; i++)
        v[i] = (i % (k + 1)) == 0 ? 1.0 : 0.0;
    for (int sweep = 0; sweep < 60; sweep++) {
        int rotated = 0;
        for (int i = 0; i < k - 1; i++) {
            for (int j = i + 1; j < k; j++) {
                double *ui = columns + dims * i, *uj = columns + dims * j, alpha = 0, beta = 0, gamma = 0;
                for (int d = 0; d < dims; d++) {
                    alpha += ui[d] * ui[d];
                    beta += uj[d] * uj[d];
                    gamma += ui[d] * uj[d];
                }
                if (fabs(gamma) <= 1e-15 * sqrt(alpha * beta) || gamma == 0.0)
                    continue;
                rotated = 1;
                double zeta = (beta - alpha) / (2.0 * gamma);
                double t = (zeta >= 0.0 ? 1.0 : -1.0) / (fabs(zeta) + sqrt(1.0 + zeta * zeta));
                double c = 1.0 / sqrt(1.0 + t * t), s = c * t;
                for (int d = 0; d < dims; d++) {
                    double a = ui[d], b = uj[d];
                    ui[d] = c * a - s * b;
                    uj[d] = s * a + c * b;
                }
                for (int d = 0; d < k; d++) {
                    double a = v[k * d + i], b = v[k * d + j];
                    v[k * d + i] = c * a - s * b;
                    v[k * d + j] = s * a + c * b;
                }
            }
        }
        if (!rotated)
            break;
    }
    double largest = 0.0;
    for (int i = 0; i < k; i++) {
        sigma[i] = sqrt(dot_n(columns + dims * i, columns + dims * i, dims));
        largest = fmax(largest, sigma[i]);
    }
    for (int j = 0; j < k; j++)
        g[j] = 0.0;
    for (int i = 0; i < k; i++) {
        if (!(sigma[i] > 1e-10 * largest))
            continue;
        double coefficient = dot_n(columns + dims * i, r, dims) / (sigma[i] * sigma[i]);
        for (int j = 0; j < k; j++)
            g[j] += v[k * j + i] * coefficient;
    }
}

static double reject_history(State *st, int *reached)
{
    st->history = 0;
    forward(st);
    return total_errors(st, reached);
}

/* The sweep just run joins the history, its start pose as input and the swept pose as output;
 * past memory + 1 pairs the oldest goes (solve._Anderson._remember_sweep). */
static void remember_sweep(State *st)
{
    int dims = st->dims, memory = st->pb->acceleration;
    if (st->history == memory + 1) {
        memmove(st->inputs, st->inputs + dims, (size_t)memory * dims * sizeof(double));
        memmove(st->outputs, st->outputs + dims, (size_t)memory * dims * sizeof(double));
        st->history--;
    }
    memcpy(st->inputs + (size_t)st->history * dims, st->start, dims * sizeof(double));
    pose_vector(st, st->outputs + (size_t)st->history * dims);
    st->history++;
}

/* Where the sweeps are heading, extrapolated from the history into st->guess; returns whether
 * it is finite (solve._Anderson._anderson_guess). */
static int anderson_guess(State *st)
{
    int dims = st->dims, m = st->history, k = m - 1;
    const double *last_out = st->outputs + (size_t)(m - 1) * dims, *last_in = st->inputs + (size_t)(m - 1) * dims;
    double *residual = st->guess;
    for (int d = 0; d < dims; d++)
        residual[d] = last_out[d] - last_in[d];
    for (int j = 0; j < k; j++) {
        const double *o0 = st->outputs + (size_t)j * dims, *o1 = o0 + dims;
        const double *i0 = st->inputs + (size_t)j * dims, *i1 = i0 + dims;
        for (int d = 0; d < dims; d++)
            st->columns[(size_t)j * dims + d] = (o1[d] - i1[d]) - (o0[d] - i0[d]);
    }
    least_squares(st->columns, dims, k, residual, st->svd_v, st->sigma, st->gamma);
    int finite = 1;
    for (int d = 0; d < dims; d++) {
        double value = last_out[d];
        for (int j = 0; j < k; j++)
            value -= (st->outputs[(size_t)(j + 1) * dims + d] - st->outputs[(size_t)j * dims + d]) * st->gamma[j];
        st->guess[d] = value;
        finite &= isfinite(value) != 0;
    }
    return finite;
}

/* The guess's rotations, limited and normalized, into st->saved; returns whether a bone would end
 * farther from the warm start than allowance_scale dampening steps (solve._Anderson._settle_guess). */
static int settle_guess(State *st, double allowance_scale)
{
    const ewbik_problem *pb = st->pb;
    for (int i = 0; i < pb->n_solved; i++) {
        double q[4];
        quat_exp(st->guess + 6 * i, q);
        if (settle(pb, pb->solved[i], q, allowance_scale))
            return 1;
        memcpy(st->saved + 7 * i, q, sizeof q);
    }
    return 0;
}

/* The guess posed and kept if it lowers the total misfit; otherwise the swept pose back and the
 * history dropped (solve._Anderson._try_guess). Returns the new total. */
static double try_guess(State *st, double total, int *reached)
{
    const ewbik_problem *pb = st->pb;
    double *saved = st->saved;
    for (int i = 0; i < pb->n_solved; i++) {
        int b = pb->solved[i];
        double swap[7];
        memcpy(swap, saved + 7 * i, 4 * sizeof(double));
        memcpy(swap + 4, st->guess + 6 * i + 3, 3 * sizeof(double));
        memcpy(saved + 7 * i, pb->rotations + 4 * b, 4 * sizeof(double));
        memcpy(saved + 7 * i + 4, pb->locations + 3 * b, 3 * sizeof(double));
        memcpy(pb->rotations + 4 * b, swap, 4 * sizeof(double));
        memcpy(pb->locations + 3 * b, swap + 4, 3 * sizeof(double));
    }
    forward(st);
    int guess_reached;
    double guess_total = total_errors(st, &guess_reached);
    if (guess_total < total) {
        *reached = guess_reached;
        return guess_total;
    }
    for (int i = 0; i < pb->n_solved; i++) {
        int b = pb->solved[i];
        memcpy(pb->rotations + 4 * b, saved + 7 * i, 4 * sizeof(double));
        memcpy(pb->locations + 3 * b, saved + 7 * i + 4, 3 * sizeof(double));
    }
    return reject_history(st, reached);
}

/* One Anderson step after a sweep (solve._Anderson.extrapolate); returns the new total. */
static double extrapolate(State *st, double total, double allowance_scale, int *reached)
{
    remember_sweep(st);
    if (st->history < 2) {
        forward(st);
        *reached = 0;
        return total;
    }
    if (!anderson_guess(st) || settle_guess(st, allowance_scale))
        return reject_history(st, reached);
    return try_guess(st, total, reached);
}

/* ---- analytic finish of two-bone limbs (solve._finish_limbs, two_bone.two_bone_ik) ---- */

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

/* The side stuck limb l's joint may bend to (solve._allowed_bends): opposite to where the
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
 * and its pin missed (solve._stuck): where a stalled polish tries the finish. */
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

/* Place every limb, keep each only if its pin got no farther and no bone travelled too far.
 * Each joint bends to the side it is bent to now; with `stuck_only` only the stuck limbs are
 * placed, each bent to its limits' side. */
static void finish_limbs(State *st, double allowance_scale, int stuck_only)
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
static int any_stuck(const State *st)
{
    for (int l = 0; l < st->pb->n_limbs; l++)
        if (stuck(st, l))
            return 1;
    return 0;
}

/* Whether every pin that does not end a limb is within tolerance. */
static int others_reached(const State *st)
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

/* ---- the polish: damped Gauss-Newton over the solved bones, one tree at a time (solver/polish.py) ---- */

typedef struct {
    int columns, moving, rows, params, pairs, pins; /* C solved bones, T translating roots, 12P, 3C + 3T, K, P */
    int *bones;                              /* (C,) the tree's solved bones, ascending */
    int *pin;                                /* (P,) the tree's pins, ascending */
    int *pair_pin, *pair_column;             /* (K,) index into pin, into bones */
    unsigned char *translating;              /* (C,) */
    double *scale;                           /* (params,) 1 / sqrt(D) */
    double *cap;                             /* (C,) turn cap per step */
    double *jac;                             /* (rows, params), columns scaled */
    double *restricted;                      /* (rows, params): jac with each bone's columns times its projector */
    double *free;                            /* (C, 9) projector onto the turns each bone may take */
    double *corrections;                     /* (C, 3) the limits' clamp of the last try, world rotation vectors */
    double *best;                            /* (C, 7) the best kept try's rotations and locations */
    double *gram;                            /* (s, s), s = min(rows, params): the restricted Jacobian's Gram matrix */
    double *system;                          /* (s, s): the Gram matrix damped */
    double *residual;                        /* (rows,) */
    double *rhs;                             /* (s,) */
    double *step;                            /* (params,) */
    double *frames;                          /* (C, 9) constraint frames at the step's start */
    double *saved;                           /* (C, 7) rotation and location at the step's start */
    double *block;                           /* the one allocation holding the arrays above */
    double damping, clamped;
    double misfit;                           /* the tree's best misfit in the current step */
    int kept, grown, restricted_count, active;
    int gram_fresh;                          /* gram holds the current restriction's (tries that only damp more reuse it) */
} PolishTree;

typedef struct {
    int count;
    PolishTree *trees;
} Polish;

static int is_below(const ewbik_problem *pb, int bone, int pin)
{
    for (int b = pb->pin_bone[pin]; b >= 0; b = pb->parents[b])
        if (b == bone)
            return 1;
    return 0;
}

static int tree_root(const int *tree_of, int p)
{
    while (tree_of[p] != p)
        p = tree_of[p];
    return p;
}

/* polish.pin_trees over the pins below each solved bone (the plan's moved pins): tree_of[p] = the
 * first pin of p's tree, -1 for a pin no solved bone moves; row_tree[row] = the tree of the batch
 * row's bone. Returns the number of trees. */
static int pin_trees(const ewbik_problem *pb, int *tree_of, int *row_tree)
{
    int count = 0, rows = pb->batch_start[pb->n_batches];
    for (int p = 0; p < pb->n_pins; p++)
        tree_of[p] = -1;
    for (int x = 0; x < pb->moved_start[rows]; x++)
        tree_of[pb->moved_pin[x]] = pb->moved_pin[x];
    for (int row = 0; row < rows; row++) {
        int smallest = -1;
        for (int x = pb->moved_start[row]; x < pb->moved_start[row + 1]; x++) {
            int root = tree_root(tree_of, pb->moved_pin[x]);
            smallest = smallest < 0 || root < smallest ? root : smallest;
        }
        for (int x = pb->moved_start[row]; x < pb->moved_start[row + 1]; x++)
            tree_of[tree_root(tree_of, pb->moved_pin[x])] = smallest;
    }
    for (int p = 0; p < pb->n_pins; p++)
        if (tree_of[p] >= 0) {
            tree_of[p] = tree_root(tree_of, p);
            count += tree_of[p] == p;
        }
    for (int row = 0; row < rows; row++)
        row_tree[row] = pb->moved_start[row] < pb->moved_start[row + 1] ? tree_of[pb->moved_pin[pb->moved_start[row]]] : -1;
    return count;
}

/* The tree's bones (column_tree: each solved bone's tree), pins and translating roots, and the
 * sizes that follow; -1 when memory ran out. */
static int tree_members(const ewbik_problem *pb, const int *tree_of, const int *column_tree, int first, PolishTree *pl)
{
    int c_count = 0, pins = 0, pairs = 0;
    for (int p = 0; p < pb->n_pins; p++)
        pins += tree_of[p] == first;
    for (int i = 0; i < pb->n_solved; i++)
        c_count += column_tree[i] == first;
    pl->bones = malloc(((size_t)c_count + pins + 1) * sizeof(int));
    pl->translating = calloc((size_t)c_count + 1, 1);
    if (!pl->bones || !pl->translating)
        return -1;
    pl->pin = pl->bones + c_count;
    pl->columns = 0, pl->pins = 0, pl->moving = 0;
    for (int p = 0; p < pb->n_pins; p++)
        if (tree_of[p] == first)
            pl->pin[pl->pins++] = p;
    for (int i = 0; i < pb->n_solved; i++)
        if (column_tree[i] == first)
            pl->bones[pl->columns++] = pb->solved[i];
    for (int i = 0; i < pl->columns; i++)
        for (int k = 0; k < pl->pins; k++)
            pairs += is_below(pb, pl->bones[i], pl->pin[k]);
    pl->pair_pin = malloc(2 * ((size_t)pairs + 1) * sizeof(int));
    if (!pl->pair_pin)
        return -1;
    pl->pair_column = pl->pair_pin + pairs;
    pl->pairs = 0;
    for (int i = 0; i < pl->columns; i++)
        for (int k = 0; k < pl->pins; k++)
            if (is_below(pb, pl->bones[i], pl->pin[k])) {
                pl->pair_pin[pl->pairs] = k;
                pl->pair_column[pl->pairs++] = i;
            }
    for (int row = 0; row < pb->batch_start[pb->n_batches]; row++)
        for (int i = 0; i < pl->columns && pb->translating[row]; i++)
            if (pl->bones[i] == pb->batch_bones[row])
                pl->translating[i] = 1;
    for (int i = 0; i < pl->columns; i++)
        pl->moving += pl->translating[i];
    pl->rows = 12 * pl->pins, pl->params = 3 * pl->columns + 3 * pl->moving;
    return 0;
}

/* The work arrays, caps and weights of polish.TreePolish.make; -1 when memory ran out. */
static int tree_allocate(const ewbik_problem *pb, PolishTree *pl)
{
    int c_count = pl->columns, rows = pl->rows, params = pl->params, s = rows < params ? rows : params;
    size_t doubles = (size_t)params * 2 + (size_t)c_count * 36 + 2 * (size_t)rows * params + 2 * (size_t)s * s +
                     (size_t)rows + s;
    double *next = malloc(doubles * sizeof(double));
    if (!next)
        return -1;
    pl->block = next;
    pl->scale = next, next += params;
    pl->step = next, next += params;
    pl->cap = next, next += c_count;
    pl->frames = next, next += (size_t)c_count * 9;
    pl->saved = next, next += (size_t)c_count * 7;
    pl->jac = next, next += (size_t)rows * params;
    pl->restricted = next, next += (size_t)rows * params;
    pl->free = next, next += (size_t)c_count * 9;
    pl->corrections = next, next += (size_t)c_count * 3;
    pl->best = next, next += (size_t)c_count * 7;
    pl->gram = next, next += (size_t)s * s;
    pl->system = next, next += (size_t)s * s;
    pl->residual = next, next += rows;
    pl->rhs = next;
    double reference = 0.0;
    for (int i = 0; i < c_count; i++)
        reference = fmax(reference, pb->max_step[pl->bones[i]]);
    for (int i = 0; i < c_count; i++) {
        double own = pb->max_step[pl->bones[i]];
        pl->cap[i] = pl->translating[i] ? PI : pb->polish_turn_cap * own;
        for (int c = 0; c < 3; c++)
            pl->scale[3 * i + c] = own / reference;
    }
    for (int t = 3 * c_count; t < params; t++)
        pl->scale[t] = 1.0;
    pl->damping = pb->polish_lambda_min;
    pl->clamped = pb->polish_clamped;
    return 0;
}

static void polish_free(Polish *pl)
{
    for (int t = 0; t < pl->count; t++) {
        free(pl->trees[t].bones);
        free(pl->trees[t].pair_pin);
        free(pl->trees[t].translating);
        free(pl->trees[t].block);
    }
    free(pl->trees);
}

/* polish.polish_plan's trees and polish.Polisher.make; -1 when memory ran out. */
static int polish_allocate(const ewbik_problem *pb, Polish *pl)
{
    int rows = pb->batch_start[pb->n_batches], failed = 0;
    int *tree_of = malloc(((size_t)pb->n_pins + rows + pb->n_solved + pb->n_bones + 1) * sizeof(int));
    if (!tree_of)
        return -1;
    int *row_tree = tree_of + pb->n_pins, *column_tree = row_tree + rows, *bone_tree = column_tree + pb->n_solved;
    pl->count = pin_trees(pb, tree_of, row_tree);
    for (int b = 0; b < pb->n_bones; b++)
        bone_tree[b] = -1;
    for (int row = 0; row < rows; row++)
        bone_tree[pb->batch_bones[row]] = row_tree[row];
    for (int i = 0; i < pb->n_solved; i++)
        column_tree[i] = bone_tree[pb->solved[i]];
    pl->trees = calloc((size_t)pl->count + 1, sizeof(PolishTree));
    for (int p = 0, t = 0; pl->trees && p < pb->n_pins && !failed; p++)
        if (tree_of[p] == p)
            failed = tree_members(pb, tree_of, column_tree, p, pl->trees + t) != 0 ||
                     tree_allocate(pb, pl->trees + t) != 0,
            t++;
    free(tree_of);
    if (!pl->trees || failed) {
        if (pl->trees)
            polish_free(pl);
        return -1;
    }
    return 0;
}

/* polish.residuals and polish.jacobian of one tree, the Jacobian's columns scaled (damped_step's
 * `scaled`). */
static void polish_linearize(const State *st, PolishTree *pl)
{
    const ewbik_problem *pb = st->pb;
    int params = pl->params;
    double sqrt_weights[4];
    memset(pl->jac, 0, (size_t)pl->rows * params * sizeof(double));
    for (int k = 0; k < pl->pins; k++) {
        int p = pl->pin[k];
        const double *w = pb->axis_weight + 3 * p, *eff = st->eff_pos + 3 * p, *tgt = pb->target_pos + 3 * p;
        double *r = pl->residual + 12 * k;
        sqrt_weights[0] = sqrt(pb->weight[p] * (1.0 + 2.0 * (w[0] + w[1] + w[2])));
        for (int a = 0; a < 3; a++)
            sqrt_weights[1 + a] = sqrt(2.0 * pb->weight[p] * w[a]);
        for (int c = 0; c < 3; c++)
            r[c] = sqrt_weights[0] * (eff[c] - tgt[c]);
        for (int x = 3; x < 12; x++)
            r[x] = sqrt_weights[x / 3] * (st->eff_axes[9 * p + x - 3] - pb->target_axes[9 * p + x - 3]);
    }
    for (int k = 0; k < pl->pairs; k++) {
        int p = pl->pin[pl->pair_pin[k]], i = pl->pair_column[k], b = pl->bones[i], row = 12 * pl->pair_pin[k];
        const double *w = pb->axis_weight + 3 * p;
        double s0 = sqrt(pb->weight[p] * (1.0 + 2.0 * (w[0] + w[1] + w[2])));
        for (int block = 0; block < 4; block++) {
            double lever[3], weight = block ? sqrt(2.0 * pb->weight[p] * w[block - 1]) : s0;
            for (int c = 0; c < 3; c++)
                lever[c] = block ? st->eff_axes[9 * p + 3 * (block - 1) + c] : st->eff_pos[3 * p + c] - st->head[3 * b + c];
            /* -weight [lever]x */
            double cross[9] = {0.0, lever[2], -lever[1], -lever[2], 0.0, lever[0], lever[1], -lever[0], 0.0};
            for (int r = 0; r < 3; r++)
                for (int c = 0; c < 3; c++)
                    pl->jac[(size_t)(row + 3 * block + r) * params + 3 * i + c] = weight * cross[3 * r + c];
        }
        if (pl->translating[i]) {
            int t = 0;
            for (int j = 0; j < i; j++)
                t += pl->translating[j];
            for (int c = 0; c < 3; c++)
                pl->jac[(size_t)(row + c) * params + 3 * pl->columns + 3 * t + c] = s0;
        }
    }
    for (int r = 0; r < pl->rows; r++)
        for (int c = 0; c < params; c++)
            pl->jac[(size_t)r * params + c] *= pl->scale[c];
}

/* Solve the symmetric positive definite a (n x n, destroyed) x = b in place; -1 if not definite. */
static int cholesky_solve(double *a, int n, double *b)
{
    for (int j = 0; j < n; j++) {
        double d = a[(size_t)j * n + j];
        for (int k = 0; k < j; k++)
            d -= a[(size_t)j * n + k] * a[(size_t)j * n + k];
        if (!(d > 0.0))
            return -1;
        a[(size_t)j * n + j] = sqrt(d);
        for (int i = j + 1; i < n; i++) {
            double v = a[(size_t)i * n + j];
            for (int k = 0; k < j; k++)
                v -= a[(size_t)i * n + k] * a[(size_t)j * n + k];
            a[(size_t)i * n + j] = v / a[(size_t)j * n + j];
        }
    }
    for (int i = 0; i < n; i++) {
        for (int k = 0; k < i; k++)
            b[i] -= a[(size_t)i * n + k] * b[k];
        b[i] /= a[(size_t)i * n + i];
    }
    for (int i = n - 1; i >= 0; i--) {
        for (int k = i + 1; k < n; k++)
            b[i] -= a[(size_t)k * n + i] * b[k];
        b[i] /= a[(size_t)i * n + i];
    }
    return 0;
}

/* A A^T of the restricted Jacobian in residual space, block by block: pins p and q share only
 * the columns of the bones above both (the pairs are grouped by column, pins ascending), and
 * every pin the translating roots' columns. */
static void residual_gram(PolishTree *pl)
{
    int m = pl->rows, n = pl->params, first_shift = 3 * pl->columns;
    const double *a = pl->restricted;
    double *g = pl->gram;
    memset(g, 0, (size_t)m * m * sizeof(double));
    for (int x = 0; x < pl->pairs; x++) {
        int i = pl->pair_column[x], p = pl->pair_pin[x];
        for (int y = x; y < pl->pairs && pl->pair_column[y] == i; y++) {
            int q = pl->pair_pin[y];
            for (int r = 0; r < 12; r++)
                for (int c = 0; c < 12; c++)
                    g[(size_t)(12 * p + r) * m + 12 * q + c] +=
                        dot3(a + (size_t)(12 * p + r) * n + 3 * i, a + (size_t)(12 * q + c) * n + 3 * i);
        }
    }
    if (first_shift < n)
        for (int r = 0; r < m; r++)
            for (int c = r - r % 12; c < m; c++)
                g[(size_t)r * m + c] +=
                    dot_n(a + (size_t)r * n + first_shift, a + (size_t)c * n + first_shift, n - first_shift);
    for (int r = 0; r < m; r++)
        for (int c = r - r % 12 + 12; c < m; c++)
            g[(size_t)c * m + r] = g[(size_t)r * m + c];
}

/* polish._restricted_step's Jacobian: each bone's columns times its projector. */
static void restrict_jacobian(PolishTree *pl)
{
    int m = pl->rows, n = pl->params;
    for (int r = 0; r < m; r++) {
        const double *row = pl->jac + (size_t)r * n;
        double *out = pl->restricted + (size_t)r * n;
        for (int i = 0; i < pl->columns; i++) {
            const double *f = pl->free + 9 * i, *j = row + 3 * i;
            for (int c = 0; c < 3; c++)
                out[3 * i + c] = j[0] * f[c] + j[1] * f[3 + c] + j[2] * f[6 + c];
        }
        memcpy(out + 3 * pl->columns, row + 3 * pl->columns, (size_t)(n - 3 * pl->columns) * sizeof(double));
    }
}

/* The restricted Jacobian and its Gram matrix in the smaller space (pl->restricted, pl->gram). */
static void restricted_gram(PolishTree *pl, int params_space)
{
    int m = pl->rows, n = pl->params, s = params_space ? n : m;
    const double *a = pl->restricted;
    restrict_jacobian(pl);
    if (params_space) {
        for (int i = 0; i < s; i++)
            for (int j = 0; j <= i; j++) {
                double v = 0.0;
                for (int r = 0; r < m; r++)
                    v += a[(size_t)r * n + i] * a[(size_t)r * n + j];
                pl->gram[(size_t)i * s + j] = pl->gram[(size_t)j * s + i] = v;
            }
    } else {
        residual_gram(pl);
    }
    pl->gram_fresh = 1;
}

/* polish.damped_step's damped system in the smaller space (pl->system, pl->rhs); its size. */
static int damped_system(PolishTree *pl, int params_space)
{
    int m = pl->rows, n = pl->params, s = params_space ? n : m;
    const double *a = pl->restricted;
    if (!pl->gram_fresh)
        restricted_gram(pl, params_space);
    memcpy(pl->system, pl->gram, (size_t)s * s * sizeof(double));
    double trace = 0.0;
    for (int i = 0; i < s; i++)
        trace += pl->system[(size_t)i * s + i];
    double mu = pl->damping * fmax(trace / s, 1e-300);
    for (int i = 0; i < s; i++) {
        pl->system[(size_t)i * s + i] += mu;
        double v = 0.0;
        if (params_space)
            for (int r = 0; r < m; r++)
                v -= a[(size_t)r * n + i] * pl->residual[r];
        pl->rhs[i] = params_space ? v : pl->residual[i];
    }
    return s;
}

/* polish.damped_step on the restricted Jacobian, then polish._restricted_step's projection:
 * pl->step; -1 when the system is not solvable. */
static int damped_step(PolishTree *pl)
{
    int m = pl->rows, n = pl->params, params_space = n <= m;
    const double *a = pl->restricted;
    if (cholesky_solve(pl->system, damped_system(pl, params_space), pl->rhs) != 0)
        return -1;
    for (int c = 0; c < n; c++) {
        double v = 0.0;
        if (params_space)
            v = pl->rhs[c];
        else
            for (int r = 0; r < m; r++)
                v -= a[(size_t)r * n + c] * pl->rhs[r];
        pl->step[c] = pl->scale[c] * v;
        if (!isfinite(pl->step[c]))
            return -1;
    }
    for (int i = 0; i < pl->columns; i++)
        matvec(pl->free + 9 * i, pl->step + 3 * i, pl->step + 3 * i);
    return 0;
}

/* polish._restrict: whether any bone got a new blocked direction. */
static int restrict_turns(PolishTree *pl)
{
    int any = 0;
    for (int i = 0; i < pl->columns; i++) {
        double direction[3], *f = pl->free + 9 * i;
        matvec(f, pl->corrections + 3 * i, direction);
        double size = sqrt(dot3(direction, direction));
        if (!(size > pl->clamped))
            continue;
        any = 1;
        for (int r = 0; r < 3; r++)
            for (int c = 0; c < 3; c++)
                f[3 * r + c] -= direction[r] * direction[c] / (size * size);
    }
    return any;
}

/* polish._apply: each bone's capped world turn about its head, limited (the clamp's correction
 * kept in pl->corrections); translating roots moved. */
static void polish_apply(State *st, PolishTree *pl, int iteration)
{
    const ewbik_problem *pb = st->pb;
    for (int t = 0, i = 0; i < pl->columns; i++) {
        int b = pl->bones[i];
        double turn[3], local[3], delta[4], *rotation = pb->rotations + 4 * b;
        memcpy(turn, pl->step + 3 * i, sizeof turn);
        double angle = sqrt(dot3(turn, turn)), shrink = fmin(1.0, pl->cap[i] / (angle > 0.0 ? angle : 1.0));
        for (int c = 0; c < 3; c++)
            turn[c] *= shrink;
        matvec_t(pl->frames + 9 * i, turn, local);
        quat_exp(local, delta);
        quat_multiply(delta, pl->saved + 7 * i, rotation);
        memset(pl->corrections + 3 * i, 0, 3 * sizeof(double));
        if (pb->limits && pb->limits->limited[b]) {
            double inverse[4], correction[4], vector[3];
            quat_conjugate(rotation, inverse);
            ewbik_constrain(pb->limits, b, rotation, iteration);
            quat_normalize(rotation);
            quat_multiply(rotation, inverse, correction);
            quat_log(correction, vector);
            matvec(pl->frames + 9 * i, vector, pl->corrections + 3 * i);
        }
        quat_normalize(rotation);
        memcpy(pb->locations + 3 * b, pl->saved + 7 * i + 4, 3 * sizeof(double));
        if (pl->translating[i]) {
            double shift[3];
            matvec_t(pl->frames + 9 * i, pl->step + 3 * pl->columns + 3 * t++, shift);
            for (int c = 0; c < 3; c++)
                pb->locations[3 * b + c] += shift[c];
        }
    }
}

static void polish_pose(const ewbik_problem *pb, const PolishTree *pl, double *out, int store)
{
    for (int i = 0; i < pl->columns; i++) {
        int b = pl->bones[i];
        if (store) {
            memcpy(out + 7 * i, pb->rotations + 4 * b, 4 * sizeof(double));
            memcpy(out + 7 * i + 4, pb->locations + 3 * b, 3 * sizeof(double));
        } else {
            memcpy(pb->rotations + 4 * b, out + 7 * i, 4 * sizeof(double));
            memcpy(pb->locations + 3 * b, out + 7 * i + 4, 3 * sizeof(double));
        }
    }
}

/* The tree's weighted misfit (its share of total_errors). */
static double tree_misfit(const State *st, const PolishTree *pl)
{
    double misfit = 0.0;
    for (int k = 0; k < pl->pins; k++)
        misfit += st->pb->weight[pl->pin[k]] * pin_cost(st, pl->pin[k]);
    return misfit;
}

/* polish._TreeTry.start: linearize the tree at the step's start; a tree whose pins are all
 * reached sits the step out. */
static void tree_start(State *st, PolishTree *pl)
{
    pl->kept = pl->grown = pl->restricted_count = pl->gram_fresh = 0;
    pl->active = 0;
    for (int k = 0; k < pl->pins && !pl->active; k++)
        pl->active = !pin_reached(st, pl->pin[k], st->pb->tolerance);
    polish_pose(st->pb, pl, pl->saved, 1);
    if (!pl->active)
        return;
    polish_linearize(st, pl);
    for (int i = 0; i < pl->columns; i++) {
        parent_frame(st, pl->bones[i], pl->frames + 9 * i);
        memcpy(pl->free + 9 * i, IDENTITY3, sizeof IDENTITY3);
    }
    pl->misfit = tree_misfit(st, pl);
}

/* polish._TreeTry.judge: keep a try that lowers the tree's misfit; whether the tree tries again. */
static int tree_judge(const State *st, PolishTree *pl)
{
    const ewbik_problem *pb = st->pb;
    double misfit = tree_misfit(st, pl);
    if (misfit < pl->misfit) {
        pl->misfit = misfit, pl->kept = 1;
        polish_pose(pb, pl, pl->best, 1);
    }
    if (pl->restricted_count < pb->polish_tries && restrict_turns(pl)) {
        pl->restricted_count++;
        pl->gram_fresh = 0;
        return 1;
    }
    if (pl->kept || pl->grown == pb->polish_tries)
        return 0;
    pl->damping = fmin(pl->damping * pb->polish_grow, pb->polish_lambda_max);
    pl->grown++;
    return 1;
}

/* One guarded polish step of every tree (polish.polish): the trees try side by side, one forward
 * pass per round; returns the total, *kept says whether it dropped by more than its rounding. */
static double polish_step(State *st, Polish *polish, int iteration, int *reached, int *kept)
{
    const ewbik_problem *pb = st->pb;
    int active = polish->count, start_reached;
    double start = total_errors(st, &start_reached);
    for (int t = 0; t < polish->count; t++)
        tree_start(st, polish->trees + t);
    while (active) {
        active = 0;
        for (int t = 0; t < polish->count; t++) {
            PolishTree *pl = polish->trees + t;
            if (pl->active && damped_step(pl) != 0)
                pl->active = 0;
            if (pl->active)
                polish_apply(st, pl, iteration), active++;
        }
        if (!active)
            break;
        forward(st);
        for (int t = 0; t < polish->count; t++)
            if (polish->trees[t].active)
                polish->trees[t].active = tree_judge(st, polish->trees + t);
    }
    for (int t = 0; t < polish->count; t++) {
        PolishTree *pl = polish->trees + t;
        if (pl->kept)
            pl->damping = fmax(pl->damping / pb->polish_shrink, pb->polish_lambda_min);
        polish_pose(pb, pl, pl->kept ? pl->best : pl->saved, 0);
    }
    forward(st);
    double polished = total_errors(st, reached);
    *kept = polished < (1.0 - ROUNDING) * start;
    return polished;
}

/* One EWBIK iteration (solve._sweep): every batch's bone steps, then an Anderson step if `accelerate`. */
static double sweep(State *st, int iteration, int accelerate, int *reached)
{
    const ewbik_problem *pb = st->pb;
    if (accelerate)
        pose_vector(st, st->start);
    for (int batch = 0; batch < pb->n_batches; batch++) {
        int limited = batch_limited(pb, batch);
        for (int row = pb->batch_start[batch]; row < pb->batch_start[batch + 1]; row++)
            solve_bone_step(st, row, iteration, limited);
    }
    double total = total_errors(st, reached);
    if (accelerate && !*reached)
        return extrapolate(st, total, (double)(iteration + 1), reached);
    forward(st);
    return total;
}

/* Position error and orientation error over the weighted axes (_State.pin_errors). */
static void report_errors(const State *st)
{
    const ewbik_problem *pb = st->pb;
    for (int p = 0; p < pb->n_pins; p++) {
        double axis2[3], pos2 = squared_errors(st, p, axis2), single = 0.0;
        int count = 0;
        for (int a = 0; a < 3; a++) {
            if (pb->axis_weight[3 * p + a] > 0.0) {
                count++;
                single = fmax(single, 2.0 * asin(fmin(1.0, sqrt(axis2[a]) / 2.0)));
            }
        }
        double full = 2.0 * asin(fmin(1.0, sqrt((axis2[0] + axis2[1] + axis2[2]) / 8.0)));
        pb->position_errors[p] = sqrt(pos2);
        pb->orientation_errors[p] = count >= 2 ? full : (count == 1 ? single : 0.0);
    }
}

static int allocate(State *st)
{
    const ewbik_problem *pb = st->pb;
    int n = pb->n_bones, pins = pb->n_pins, limbs = pb->n_limbs, memory = pb->acceleration;
    st->dims = 6 * pb->n_solved;
    size_t doubles = (size_t)n * 12 + (size_t)pins * 12 + (size_t)limbs * 25 +
                     (size_t)st->dims * (2 * (size_t)(memory + 1) + 2 + (size_t)memory) + (size_t)pb->n_solved * 7 +
                     (size_t)memory * memory + 2 * (size_t)memory + 1;
    double *block = malloc(doubles * sizeof(double) + (size_t)limbs + 1);
    if (!block)
        return -1;
    st->block = block;
    double *next = block;
#define TAKE(field, count) (st->field = next, next += (count))
    TAKE(world, (size_t)n * 9);
    TAKE(head, (size_t)n * 3);
    TAKE(eff_pos, (size_t)pins * 3);
    TAKE(eff_axes, (size_t)pins * 9);
    TAKE(limb_new, (size_t)limbs * 12);
    TAKE(limb_old, (size_t)limbs * 12);
    TAKE(limb_before, (size_t)limbs);
    TAKE(inputs, (size_t)st->dims * (memory + 1));
    TAKE(outputs, (size_t)st->dims * (memory + 1));
    TAKE(start, (size_t)st->dims);
    TAKE(guess, (size_t)st->dims);
    TAKE(columns, (size_t)st->dims * memory);
    TAKE(saved, (size_t)pb->n_solved * 7);
    TAKE(svd_v, (size_t)memory * memory);
    TAKE(sigma, (size_t)memory);
    TAKE(gamma, (size_t)memory + 1);
#undef TAKE
    st->limb_bad = (unsigned char *)next;
    st->history = 0;
    return 0;
}

int ewbik_abi_version(void) { return EWBIK_ABI_VERSION; }

int ewbik_problem_size(void) { return (int)sizeof(ewbik_problem); }

int ewbik_limits_size(void) { return (int)sizeof(ewbik_limits); }

#define OFFSET(type, field) (long long)offsetof(type, field)

static int layout(const long long *fields, int count, long long *offsets, int capacity)
{
    for (int i = 0; i < count && i < capacity; i++)
        offsets[i] = fields[i];
    return count;
}

int ewbik_problem_layout(long long *offsets, int capacity)
{
    static const long long fields[] = {
        OFFSET(ewbik_problem, n_bones), OFFSET(ewbik_problem, parents), OFFSET(ewbik_problem, local_rest),
        OFFSET(ewbik_problem, local_offset), OFFSET(ewbik_problem, n_kinematic), OFFSET(ewbik_problem, kinematic),
        OFFSET(ewbik_problem, n_pins), OFFSET(ewbik_problem, pin_bone), OFFSET(ewbik_problem, weight),
        OFFSET(ewbik_problem, axis_weight), OFFSET(ewbik_problem, target_pos), OFFSET(ewbik_problem, target_axes),
        OFFSET(ewbik_problem, n_batches), OFFSET(ewbik_problem, batch_start), OFFSET(ewbik_problem, batch_bones),
        OFFSET(ewbik_problem, seen_start), OFFSET(ewbik_problem, seen_pin), OFFSET(ewbik_problem, seen_factor),
        OFFSET(ewbik_problem, moved_start), OFFSET(ewbik_problem, moved_pin), OFFSET(ewbik_problem, translating),
        OFFSET(ewbik_problem, n_solved), OFFSET(ewbik_problem, solved), OFFSET(ewbik_problem, n_limbs),
        OFFSET(ewbik_problem, limbs), OFFSET(ewbik_problem, max_step), OFFSET(ewbik_problem, frozen),
        OFFSET(ewbik_problem, limits), OFFSET(ewbik_problem, iterations), OFFSET(ewbik_problem, tolerance),
        OFFSET(ewbik_problem, budget_seconds), OFFSET(ewbik_problem, stabilization), OFFSET(ewbik_problem, exact),
        OFFSET(ewbik_problem, relaxation), OFFSET(ewbik_problem, acceleration), OFFSET(ewbik_problem, analytic_limbs),
        OFFSET(ewbik_problem, guard_slack), OFFSET(ewbik_problem, guard_floor), OFFSET(ewbik_problem, stall),
        OFFSET(ewbik_problem, prefer_small), OFFSET(ewbik_problem, polish_after),
        OFFSET(ewbik_problem, polish_tries), OFFSET(ewbik_problem, polish_lambda_min),
        OFFSET(ewbik_problem, polish_lambda_max), OFFSET(ewbik_problem, polish_grow),
        OFFSET(ewbik_problem, polish_shrink), OFFSET(ewbik_problem, polish_clamped),
        OFFSET(ewbik_problem, polish_turn_cap),
        OFFSET(ewbik_problem, polish_slow), OFFSET(ewbik_problem, bend_tilt),
        OFFSET(ewbik_problem, straight_sine), OFFSET(ewbik_problem, straight_reach),
        OFFSET(ewbik_problem, adjugate_trust), OFFSET(ewbik_problem, rotations), OFFSET(ewbik_problem, locations),
        OFFSET(ewbik_problem, initial), OFFSET(ewbik_problem, position_errors),
        OFFSET(ewbik_problem, orientation_errors), OFFSET(ewbik_problem, iterations_done),
        OFFSET(ewbik_problem, converged),
    };
    return layout(fields, (int)(sizeof fields / sizeof fields[0]), offsets, capacity);
}

int ewbik_limits_layout(long long *offsets, int capacity)
{
    static const long long fields[] = {
        OFFSET(ewbik_limits, n_regions), OFFSET(ewbik_limits, limited), OFFSET(ewbik_limits, centres),
        OFFSET(ewbik_limits, radii), OFFSET(ewbik_limits, sign), OFFSET(ewbik_limits, planes),
        OFFSET(ewbik_limits, on), OFFSET(ewbik_limits, fallback), OFFSET(ewbik_limits, swing_on),
        OFFSET(ewbik_limits, twist_on), OFFSET(ewbik_limits, twist_frame), OFFSET(ewbik_limits, twist_half),
        OFFSET(ewbik_limits, comfort), OFFSET(ewbik_limits, centre), OFFSET(ewbik_limits, inside_cos),
        OFFSET(ewbik_limits, twist_tan), OFFSET(ewbik_limits, inside_tolerance),
        OFFSET(ewbik_limits, plane_tolerance), OFFSET(ewbik_limits, comfort_rate), OFFSET(ewbik_limits, comfort_decay),
    };
    return layout(fields, (int)(sizeof fields / sizeof fields[0]), offsets, capacity);
}

/* The loop's state between iterations (solve._Loop); its named steps follow, as in numpy. */
typedef struct {
    State st;
    Polish polish;
    int polisher, finish; /* polisher: the problem has a polish (numpy: a Polisher) */
    int iterations, converged, reached, settled, polishing, polish_from;
    double total, previous, started;
} Loop;

/* The start pose within the solved bones' limits, the polish's buffers, the first misfit. */
static int loop_start(Loop *lp, const ewbik_problem *pb)
{
    lp->started = now_seconds();
    lp->st.pb = pb;
    if (allocate(&lp->st) != 0)
        return -1;
    if (pb->limits)
        for (int i = 0; i < pb->n_solved; i++)
            if (pb->limits->limited[pb->solved[i]])
                ewbik_constrain(pb->limits, pb->solved[i], pb->rotations + 4 * pb->solved[i], 0);
    lp->polisher = pb->polish_after >= 0 && pb->n_pins > 0;
    if (lp->polisher && polish_allocate(pb, &lp->polish) != 0) {
        free(lp->st.block);
        return -1;
    }
    lp->finish = pb->analytic_limbs && pb->n_limbs > 0;
    lp->previous = INFINITY;
    lp->polish_from = pb->polish_after;
    forward(&lp->st);
    lp->total = total_errors(&lp->st, &lp->reached);
    return 0;
}

/* The polish takes over once no bone step was capped by its dampening in the last sweep. */
static int loop_polish_due(const Loop *lp)
{
    return lp->polisher && lp->iterations >= lp->polish_from && lp->settled;
}

/* One polish step, then the analytic finish of straight hinged limbs if it stalled; whether the
   misfit dropped (else this iteration is a sweep). */
static int loop_polish_step(Loop *lp)
{
    State *st = &lp->st;
    const ewbik_problem *pb = st->pb;
    int kept = 0;
    double before = lp->total;
    lp->total = polish_step(st, &lp->polish, lp->iterations, &lp->reached, &kept);
    lp->polishing |= kept;
    lp->polish_from = kept ? lp->iterations : lp->iterations + 1 + pb->polish_after;
    if (lp->finish && !lp->reached && lp->total > pb->polish_slow * before && any_stuck(st)) {
        double stalled = lp->total;
        finish_limbs(st, (double)(lp->iterations + 1), 1);
        lp->total = total_errors(st, &lp->reached);
        kept |= lp->total < stalled;
    }
    return kept;
}

/* One EWBIK sweep, Anderson-accelerated until the polish has kept a step. */
static void loop_sweep_step(Loop *lp)
{
    lp->st.capped = 0;
    lp->total = sweep(&lp->st, lp->iterations, lp->st.pb->acceleration && !lp->polishing, &lp->reached);
    lp->settled = !lp->st.capped;
}

/* Without a polish: when only limbs miss, the analytic finish places them directly. */
static void loop_finish_when_only_limbs_miss(Loop *lp)
{
    if (lp->reached || !lp->finish || lp->polisher || !others_reached(&lp->st))
        return;
    finish_limbs(&lp->st, (double)lp->iterations, 0);
    lp->total = total_errors(&lp->st, &lp->reached);
}

/* The stopping rules after an iteration: reached, stalled, or out of time. */
static int loop_stops(Loop *lp)
{
    const ewbik_problem *pb = lp->st.pb;
    if (lp->reached) {
        lp->converged = 1;
        return 1;
    }
    if (isfinite(lp->previous) && fabs(lp->previous - lp->total) <= pb->stall * lp->previous)
        return 1;
    lp->previous = lp->total;
    return pb->budget_seconds >= 0.0 && now_seconds() - lp->started >= pb->budget_seconds;
}

/* The last limb finish, the answer's errors and flags, and the buffers freed. */
static void loop_end(Loop *lp)
{
    State *st = &lp->st;
    const ewbik_problem *pb = st->pb;
    if (lp->finish && !lp->converged && lp->iterations)
        finish_limbs(st, (double)lp->iterations, 0);
    report_errors(st);
    if (!lp->converged) {
        lp->converged = 1;
        for (int p = 0; p < pb->n_pins; p++)
            lp->converged &= pin_reached(st, p, pb->tolerance);
    }
    *pb->iterations_done = lp->iterations;
    *pb->converged = lp->converged;
    if (lp->polisher)
        polish_free(&lp->polish);
    free(st->block);
}

int ewbik_solve(const ewbik_problem *pb)
{
    Loop lp = {0};
    if (loop_start(&lp, pb) != 0)
        return -1;
    while (pb->n_pins > 0 && lp.iterations < pb->iterations) {
        int kept = loop_polish_due(&lp) ? loop_polish_step(&lp) : 0;
        if (!kept)
            loop_sweep_step(&lp);
        lp.iterations++;
        loop_finish_when_only_limbs_miss(&lp);
        if (loop_stops(&lp))
            break;
    }
    loop_end(&lp);
    return 0;
}
