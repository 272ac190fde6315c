/* Anderson acceleration of the sweeps (anderson.Anderson): the sweep seen as a fixed-point map on
 * the solved bones' pose, extrapolated from the last few sweeps and kept where it lowers the
 * misfit. Each function mirrors its numpy namesake; see those for the reasoning behind every step. */
#include <math.h>
#include <string.h>

#include "loop_state.h"
#include "vecmath.h"

/* The solved bones' rotation vectors and locations (anderson.Anderson._pose). */
static void pose_vector(const State *st, double *out)
{
    const ewbik_problem *pb = st->pb;
    for (int i = 0; i < pb->n_solved; i++) {
        int b = pb->solved[i];
        quat_log(pb->rotations + 4 * b, out + 6 * i);
        memcpy(out + 6 * i + 3, pb->locations + 3 * b, 3 * sizeof(double));
    }
}

/* The pose a sweep starts from, the input its result is paired with (anderson.Anderson.remember_start). */
void remember_start(State *st)
{
    pose_vector(st, st->start);
}

/* The history dropped (the next sweeps start it afresh); the swept pose's misfit
 * (anderson.Anderson._reject_history). */
static double reject_history(State *st, int *reached)
{
    st->history = 0;
    forward(st);
    return total_errors(st, reached);
}

/* The sweep just run joins the history, its start pose as input and the swept pose as output;
 * past memory + 1 pairs the oldest goes (anderson.Anderson._remember_sweep). */
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
 * it is finite (anderson.Anderson._anderson_guess). */
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
 * farther from the warm start than allowance_scale dampening steps (anderson.Anderson._settle_guess). */
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
 * history dropped (anderson.Anderson._try_guess). Returns the new total. */
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

/* One Anderson step after a sweep (anderson.Anderson.extrapolate); returns the new total. */
double extrapolate(State *st, double total, double allowance_scale, int *reached)
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
