/* The library's version and the sizes and field offsets of its structures, by which the loader
 * (solver/native.py) refuses a build that does not match its ctypes mirrors. */
#include <stddef.h>

#include "ewbik.h"

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
