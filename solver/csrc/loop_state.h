/* What the loop's C files share with each other and not with the library's users (ewbik.h is
 * the library's interface): the solve state and the steps one file takes from another. */
#ifndef EWBIK_LOOP_STATE_H
#define EWBIK_LOOP_STATE_H

#include "ewbik.h"
#include "internal.h"

/* The pose's frames, the pins' current places and the buffers of one solve (loop.State, with
 * the Anderson history and the limb finish's scratch). */
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

/* The polish's trees (polish.Polisher); a tree's contents are polish.c's own. */
typedef struct PolishTree PolishTree;
typedef struct {
    int count;
    PolishTree *trees;
} Polish;

/* loop.c: the state's forward pass and misfits (loop.State) */
INTERNAL void forward_bones(int n_order, const int *order, const int *parents, const double *local_rest,
                            const double *local_offset, const double *rotations, const double *locations,
                            double *world, double *head);
INTERNAL void forward(State *st);
INTERNAL double pin_cost(const State *st, int p);
INTERNAL int pin_reached(const State *st, int p, double tolerance);
INTERNAL double total_errors(const State *st, int *reached);

/* bone_step.c: one bone's step (bone_step.solve_batch) and what the jumps share with it */
INTERNAL void parent_frame(const State *st, int b, double *frame);
INTERNAL void solve_bone_step(State *st, int row, int iteration, int limited_batch);
INTERNAL int settle(const ewbik_problem *pb, int b, double *q, double allowance_scale);

/* anderson.c: Anderson acceleration of the sweeps (anderson.Anderson) */
INTERNAL void remember_start(State *st);
INTERNAL double extrapolate(State *st, double total, double allowance_scale, int *reached);

/* linear_algebra.c: the dense solves numpy leaves to LAPACK */
INTERNAL void least_squares(double *columns, int dims, int k, const double *r, double *v, double *sigma, double *g);
INTERNAL int cholesky_solve(double *a, int n, double *b);

/* limbs.c: the analytic finish of two-bone limbs (limbs.finish_limbs) */
INTERNAL void finish_limbs(State *st, double allowance_scale, int stuck_only);
INTERNAL int any_stuck(const State *st);
INTERNAL int others_reached(const State *st);

/* polish.c: damped Gauss-Newton over the solved bones, tree by tree (polish.py) */
INTERNAL int polish_allocate(const ewbik_problem *pb, Polish *polish);
INTERNAL void polish_free(Polish *polish);
INTERNAL double polish_step(State *st, Polish *polish, int iteration, int *reached, int *kept);

#endif
