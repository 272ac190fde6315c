/* The EWBIK iteration loop in C: the steps of solver/loop.py's numpy loop, one bone
 * at a time, so an iteration costs microseconds instead of hundreds of numpy calls.
 * Python (solver/native.py) plans, validates and packs; the library only iterates. */
#ifndef EWBIK_EWBIK_H
#define EWBIK_EWBIK_H

#include "kusudama.h"

typedef struct {
    /* skeleton, parents first */
    int n_bones;
    const int *parents;            /* (n,) -1 for a root */
    const double *local_rest;      /* (n, 3, 3) rest frame under the parent's rest frame */
    const double *local_offset;    /* (n, 3) head under the parent's rest frame */
    int n_kinematic;
    const int *kinematic;          /* the pinned bones and their ancestors, parents first */
    /* pins */
    int n_pins;
    const int *pin_bone;           /* (P,) */
    const double *weight;          /* (P,) */
    const double *axis_weight;     /* (P, 3) */
    const double *target_pos;      /* (P, 3) */
    const double *target_axes;     /* (P, 3, 3) rows: the target's x, y, z axes */
    /* plan: batches of bones that share no pin, leaves first */
    int n_batches;
    const int *batch_start;        /* (n_batches + 1,) into batch_bones */
    const int *batch_bones;        /* (B,) */
    const int *seen_start;         /* (B + 1,) into seen_pin and seen_factor */
    const int *seen_pin;           /* pins each bone solves for */
    const double *seen_factor;     /* their falloff factors */
    const int *moved_start;        /* (B + 1,) into moved_pin */
    const int *moved_pin;          /* pins below each bone, carried along when it turns */
    const unsigned char *translating; /* (B,) a root that may also move */
    int n_solved;
    const int *solved;             /* (S,) ascending: the pose Anderson extrapolates */
    int n_limbs;
    const int *limbs;              /* (L, 4) upper, lower, end bone and pin of each two-bone limb */
    /* per bone */
    const double *max_step;        /* (n,) dampening x (1 - stiffness) */
    const unsigned char *frozen;   /* (n,) */
    const ewbik_limits *limits;    /* NULL: no limits */
    /* settings */
    int iterations;
    double tolerance;
    double budget_seconds;         /* < 0: no time budget */
    int stabilization;
    int exact;
    double relaxation;
    int acceleration;
    int analytic_limbs;
    /* the numpy loop's constants, handed over so the two loops cannot drift apart */
    double guard_slack;            /* loop_constants.GUARD_SLACK: relative slack of the stabilization guard */
    double guard_floor;            /* loop_constants.GUARD_FLOOR: its absolute floor */
    double stall;                  /* loop_constants.STALL: relative misfit change that counts as a stall */
    double prefer_small;           /* qcp.PREFER_SMALL: tie-break toward the smaller turn */
    int polish_after;              /* sweeps before the polish takes over; < 0: no polish (falloff) */
    int polish_tries;              /* loop_constants.POLISH_TRIES */
    double polish_lambda_min;      /* loop_constants.POLISH_LAMBDA_MIN */
    double polish_lambda_max;      /* loop_constants.POLISH_LAMBDA_MAX */
    double polish_grow;            /* loop_constants.POLISH_GROW */
    double polish_shrink;          /* loop_constants.POLISH_SHRINK */
    double polish_clamped;         /* loop_constants.POLISH_CLAMPED */
    double polish_turn_cap;        /* loop_constants.POLISH_TURN_CAP: a polish turn's cap in dampenings */
    double polish_slow;            /* loop_constants.POLISH_SLOW: share of the misfit a stalled polish step keeps */
    double bend_tilt;              /* loop_constants.BEND_TILT: tilt below which a joint's limits show no bend side */
    double straight_sine;          /* loop_constants.STRAIGHT_SINE: bend below which a limb counts as straight */
    double straight_reach;         /* loop_constants.STRAIGHT_REACH: share of its length a straight limb reaches */
    double adjugate_trust;         /* qcp.ADJUGATE_TRUST: where the closed-form eigenvector is used */
    /* pose, in and out */
    double *rotations;             /* (n, 4) w, x, y, z */
    double *locations;             /* (n, 3) */
    const double *initial;         /* (n, 4) the warm start, for the travel bounds */
    /* results */
    double *position_errors;       /* (P,) */
    double *orientation_errors;    /* (P,) radians */
    int *iterations_done;
    int *converged;
} ewbik_problem;

/* Run the iterations; 0 on success, -1 when memory ran out (the pose is then untouched). */
int ewbik_solve(const ewbik_problem *problem);

/* Forward kinematics of `skeleton.forward_into`: world rotation matrices (n, 3, 3, row-major)
 * and heads (n, 3) of the bones in `order` (each after its parent); other rows untouched. */
int ewbik_forward(int n_order, const int *order, const int *parents, const double *local_rest,
                  const double *local_offset, const double *rotations, const double *locations, double *world,
                  double *head);

/* balance._balance_state, what balance asks of a pose in one call: the support polygon of the
 * `n_feet` feet whose pins are `feet` (`counts` contact points each, `points` (sum, 3) in each
 * foot's frame) placed by those pins' targets, whose axes are the rows of `axes` (P, 3, 3) and
 * whose heads lie at `places` (P, 3), on the ground's `frame` (3, 3 rows: two axes along it, then
 * up): the convex hull of the feet whose lowest point lies within `planted` of the lowest, into
 * `hull` (room for sum + 1 corners, 2 each); into `found` (7,) the centre of mass of the pose
 * (the forward pass of `ewbik_forward` into `world` and `head`, each bone's mass centre `centres`
 * (n, 3) in its frame weighted by `masses` (n,), over the bones in `order`: every bone), its
 * shift along the ground to `margin` inside the polygon (found + 3) and its depth in it
 * (found[6], negative outside). Returns the polygon's corner count, -1 when memory ran out. */
int ewbik_balance_check(int n_order, const int *order, const int *parents, const double *local_rest,
                        const double *local_offset, const double *rotations, const double *locations,
                        const double *masses, const double *centres, int n_feet, const int *feet, const int *counts,
                        const double *points, const double *axes, const double *places, const double *frame,
                        double planted, double margin, double *world, double *head, double *hull, double *found);

/* Raised whenever ewbik_problem, ewbik_limits or a function's meaning changes. */
#define EWBIK_ABI_VERSION 10

/* The loader refuses a library whose version or structure sizes differ from its ctypes
 * mirrors (a stale build, or an old copy still loaded after an update) instead of crashing. */
int ewbik_abi_version(void);
int ewbik_problem_size(void);
int ewbik_limits_size(void);

/* The byte offset of every field of the structure, in declaration order, into offsets[0..capacity);
 * returns the field count, so the loader compares the whole layout with its ctypes mirror. */
int ewbik_problem_layout(long long *offsets, int capacity);
int ewbik_limits_layout(long long *offsets, int capacity);

#endif
