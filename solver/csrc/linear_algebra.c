/* The dense solves the numpy loop leaves to LAPACK: Anderson's least squares (numpy.linalg.lstsq)
 * and the polish's damped normal equations (numpy.linalg.solve). */
#include <math.h>
#include <stddef.h>

#include "loop_state.h"
#include "vecmath.h"

/* Least squares min |A g - r| for A (dims x k, column-major in `columns`, destroyed) by a
 * one-sided Jacobi SVD, dropping singular values below 1e-10 of the largest (numpy's lstsq
 * rcond). `v` is k x k scratch, `sigma` k. */
void least_squares(double *columns, int dims, int k, const double *r, double *v, double *sigma, double *g)
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

/* Solve the symmetric positive definite a (n x n, destroyed) x = b in place; -1 if not definite. */
int cholesky_solve(double *a, int n, double *b)
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
