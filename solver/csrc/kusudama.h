/* Kusudama joint limits for the native solver loop: the packed arrays of
 * solver/kusudama.py (_Packed), one row per bone, and the per-bone clamp. */
#ifndef EWBIK_KUSUDAMA_H
#define EWBIK_KUSUDAMA_H

typedef struct {
    int n_regions;                 /* R: regions per bone (cones, then tangent cones), padded */
    const unsigned char *limited;  /* (n,) swing_on | twist_on */
    const double *centres;         /* (n, R, 3) */
    const double *radii;           /* (n, R) */
    const double *sign;            /* (n, R): +1 a cone (inside allowed), -1 a tangent cone */
    const double *planes;          /* (n, R, 3, 3): triangle planes of a tangent cone, rows */
    const unsigned char *on;       /* (n, R) */
    const double *fallback;        /* (n, R, 3) */
    const unsigned char *swing_on; /* (n,) */
    const unsigned char *twist_on; /* (n,) */
    const double *twist_frame;     /* (n, 4) w, x, y, z */
    const double *twist_half;      /* (n,) */
    const double *comfort;         /* (n,) */
    const double *centre;          /* (n, 3) */
    const double *inside_cos;      /* (n, R): a swing whose cosine to the centre passes it is inside */
    const double *twist_tan;       /* (n,): a twist whose half-angle tangent is within it is inside */
    double inside_tolerance;       /* kusudama.INSIDE_TOLERANCE: a swing this close is inside */
    double plane_tolerance;        /* kusudama.PLANE_TOLERANCE: slack of a tangent cone's planes */
    double comfort_rate;           /* kusudama.COMFORT_RATE */
    double comfort_decay;          /* kusudama.COMFORT_DECAY: per iteration */
} ewbik_limits;

/* Bring the local rotation q (w, x, y, z; unit) of `bone` inside its limits,
 * exactly as JointLimits.constrain does for one row (comfort pull, swing, twist). */
void ewbik_constrain(const ewbik_limits *limits, int bone, double q[4], int iteration);

/* The same for k bones at once (rotations (k, 4) in place): the test entry point. */
void ewbik_constrain_batch(const ewbik_limits *limits, int k, const int *bones, double *rotations, int iteration);

#endif
