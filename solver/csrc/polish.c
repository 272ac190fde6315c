/* The polish (polish.py): damped Gauss-Newton over the solved bones, one tree of pins at a time,
 * once the sweeps have found the basin. Each function mirrors its numpy namesake; see those for
 * the reasoning behind every step. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "loop_state.h"
#include "vecmath.h"

#define ROUNDING (16 * DBL_EPSILON) /* polish.ROUNDING: relative change of a sum of misfits that rounding alone makes */
#define PIN_RESIDUALS 12 /* polish.PIN_RESIDUALS: the misfit's numbers a pin (position error, three axis chords) */
#define PIN_ROWS 6       /* polish.PIN_ROWS: the rows a pin keeps (position, three for its turn) */

/* One tree's Jacobian, its restriction to the turns the limits leave, and the step's state
 * (polish.TreePolish with its _TreeTry). */
struct PolishTree {
    int columns, moving, rows, params, pairs, pins; /* C solved bones, T translating roots, 6P, 3C + 3T, K, P */
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
    double *turns;                           /* (P, 9) each pin's turn rows (pin_turn_rows) */
    double *rhs;                             /* (s,) */
    double *step;                            /* (params,) */
    double *frames;                          /* (C, 9) constraint frames at the step's start */
    double *saved;                           /* (C, 7) rotation and location at the step's start */
    double *block;                           /* the one allocation holding the arrays above */
    double damping, clamped;
    double misfit;                           /* the tree's best misfit in the current step */
    int kept, grown, restricted_count, active;
    int gram_fresh;                          /* gram holds the current restriction's (tries that only damp more reuse it) */
};

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
    pl->rows = PIN_ROWS * pl->pins, pl->params = 3 * pl->columns + 3 * pl->moving;
    return 0;
}

/* The work arrays, caps and weights of polish.TreePolish.make; -1 when memory ran out. */
static int tree_allocate(const ewbik_problem *pb, PolishTree *pl)
{
    int c_count = pl->columns, rows = pl->rows, params = pl->params, s = rows < params ? rows : params;
    size_t doubles = (size_t)params * 2 + (size_t)c_count * 36 + 2 * (size_t)rows * params + 2 * (size_t)s * s +
                     (size_t)rows + s + 9 * (size_t)pl->pins;
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
    pl->turns = next, next += 9 * (size_t)pl->pins;
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

void polish_free(Polish *pl)
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
int polish_allocate(const ewbik_problem *pb, Polish *pl)
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

/* polish.reduced_rows of one pin: its turn's rows `turn` (3 x 3, row k: sqrt(d_k) times axis k,
 * d_k the other two axes' squared weights), and the residual `r` (3,) they leave, from the
 * weighted axis chords `chords` (9,): the nine axis rows' least squares in three. */
static void pin_turn_rows(const double *axes, const double *axis_weights, const double *chords, double *turn, double *r)
{
    double moment[3] = {0.0, 0.0, 0.0}, squared[3];
    for (int a = 0; a < 3; a++) {
        double across[3];
        cross3(axes + 3 * a, chords + 3 * a, across);
        for (int c = 0; c < 3; c++)
            moment[c] += axis_weights[a] * across[c];
        squared[a] = axis_weights[a] * axis_weights[a];
    }
    for (int k = 0; k < 3; k++) {
        double d = squared[0] + squared[1] + squared[2] - squared[k], root = sqrt(d);
        for (int c = 0; c < 3; c++)
            turn[3 * k + c] = root * axes[3 * k + c];
        r[k] = d > 0.0 ? dot3(axes + 3 * k, moment) / root : 0.0;
    }
}

/* polish.residuals, polish.jacobian and polish.reduced_rows of one tree, the Jacobian's columns
 * scaled (damped_step's `scaled`): per pin its three position rows, then three for its turn. */
static void polish_linearize(const State *st, PolishTree *pl)
{
    const ewbik_problem *pb = st->pb;
    int params = pl->params;
    double sqrt_weights[4], chords[9];
    memset(pl->jac, 0, (size_t)pl->rows * params * sizeof(double));
    for (int k = 0; k < pl->pins; k++) {
        int p = pl->pin[k];
        const double *w = pb->axis_weight + 3 * p, *eff = st->eff_pos + 3 * p, *tgt = pb->target_pos + 3 * p;
        double *r = pl->residual + PIN_ROWS * k;
        sqrt_weights[0] = sqrt(pb->weight[p] * (1.0 + 2.0 * (w[0] + w[1] + w[2])));
        for (int a = 0; a < 3; a++)
            sqrt_weights[1 + a] = sqrt(2.0 * pb->weight[p] * w[a]);
        for (int c = 0; c < 3; c++)
            r[c] = sqrt_weights[0] * (eff[c] - tgt[c]);
        for (int x = 0; x < 9; x++)
            chords[x] = sqrt_weights[1 + x / 3] * (st->eff_axes[9 * p + x] - pb->target_axes[9 * p + x]);
        pin_turn_rows(st->eff_axes + 9 * p, sqrt_weights + 1, chords, pl->turns + 9 * k, r + 3);
    }
    for (int k = 0; k < pl->pairs; k++) {
        int p = pl->pin[pl->pair_pin[k]], i = pl->pair_column[k], b = pl->bones[i], row = PIN_ROWS * pl->pair_pin[k];
        const double *w = pb->axis_weight + 3 * p, *turn = pl->turns + 9 * pl->pair_pin[k];
        double s0 = sqrt(pb->weight[p] * (1.0 + 2.0 * (w[0] + w[1] + w[2]))), lever[3];
        for (int c = 0; c < 3; c++)
            lever[c] = st->eff_pos[3 * p + c] - st->head[3 * b + c];
        /* -s0 [lever]x, then the turn's rows */
        double cross[9] = {0.0, lever[2], -lever[1], -lever[2], 0.0, lever[0], lever[1], -lever[0], 0.0};
        for (int r = 0; r < 3; r++)
            for (int c = 0; c < 3; c++) {
                pl->jac[(size_t)(row + r) * params + 3 * i + c] = s0 * cross[3 * r + c];
                pl->jac[(size_t)(row + 3 + r) * params + 3 * i + c] = turn[3 * r + c];
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
            for (int r = 0; r < PIN_ROWS; r++)
                for (int c = 0; c < PIN_ROWS; c++)
                    g[(size_t)(PIN_ROWS * p + r) * m + PIN_ROWS * q + c] += dot3(
                        a + (size_t)(PIN_ROWS * p + r) * n + 3 * i, a + (size_t)(PIN_ROWS * q + c) * n + 3 * i);
        }
    }
    if (first_shift < n)
        for (int r = 0; r < m; r++)
            for (int c = r - r % PIN_ROWS; c < m; c++)
                g[(size_t)r * m + c] +=
                    dot_n(a + (size_t)r * n + first_shift, a + (size_t)c * n + first_shift, n - first_shift);
    for (int r = 0; r < m; r++)
        for (int c = r - r % PIN_ROWS + PIN_ROWS; c < m; c++)
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
    int residuals = PIN_RESIDUALS * pl->pins, mean_over = n < residuals ? n : residuals;
    double mu = pl->damping * fmax(trace / mean_over, 1e-300);
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
double polish_step(State *st, Polish *polish, int iteration, int *reached, int *kept)
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
