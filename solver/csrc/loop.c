/* The loop (loop.iterate with its _Loop): the state's forward pass and misfits (loop.State),
 * the sweep (loop._sweep), the iterations with their stopping rules, and the answer's errors.
 * Each function mirrors its numpy namesake; see those for the reasoning behind every step. */
#define _POSIX_C_SOURCE 199309L
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "loop_state.h"
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

/* World rotation matrices (row-major 3x3) and heads of the bones in `order` (parents first). */
void forward_bones(int n_order, const int *order, const int *parents, const double *local_rest,
                   const double *local_offset, const double *rotations, const double *locations, double *world,
                   double *head)
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

void forward(State *st)
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

/* The seven-point misfit of pin p (loop.State.pin_costs). */
double pin_cost(const State *st, int p)
{
    const double *w = st->pb->axis_weight + 3 * p;
    double axis2[3], pos2 = squared_errors(st, p, axis2);
    return (1.0 + 2.0 * (w[0] + w[1] + w[2])) * pos2 + 2.0 * (w[0] * axis2[0] + w[1] * axis2[1] + w[2] * axis2[2]);
}

int pin_reached(const State *st, int p, double tolerance)
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
double total_errors(const State *st, int *reached)
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

/* One EWBIK iteration (loop._sweep): every batch's bone steps, then an Anderson step if `accelerate`. */
static double sweep(State *st, int iteration, int accelerate, int *reached)
{
    const ewbik_problem *pb = st->pb;
    if (accelerate)
        remember_start(st);
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

/* Position error and orientation error over the weighted axes (loop.State.pin_errors). */
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

/* The state's arrays, all in one allocation; -1 when memory ran out. */
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

/* The loop's state between iterations (loop._Loop); its named steps follow, as in numpy. */
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
