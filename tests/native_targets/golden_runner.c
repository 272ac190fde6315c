/* Runs golden cases through a compiled solver library, as ctypes would: load it by path, check
 * what it reports, call ewbik_solve on a problem rebuilt from a case file, write the results.
 *
 *     golden_runner LIBRARY CASE...      (writes CASE.out beside each CASE)
 *
 * A case file knows nothing of the structure's fields: it is a list of memory blocks (block 0
 * is the ewbik_problem) and of pointer slots to patch, "at this offset of block b, the address
 * of block t", written by tests/native_targets/golden.py from the structures Python packed.
 * The output holds the library's ABI version and structure sizes, ewbik_solve's status and every
 * block after the call; Python reads the pose and errors from it. Little-endian, 64-bit only.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef _WIN32
#include <windows.h>
static void *open_library(const char *path) { return (void *)LoadLibraryA(path); }
static void *find_symbol(void *library, const char *name) { return (void *)GetProcAddress((HMODULE)library, name); }
#else
#include <dlfcn.h>
static void *open_library(const char *path) { return dlopen(path, RTLD_NOW | RTLD_LOCAL); }
static void *find_symbol(void *library, const char *name) { return dlsym(library, name); }
#endif

typedef int (*int_function)(void);
typedef int (*solve_function)(const void *problem);

static int read_u64(FILE *f, uint64_t *value) { return fread(value, sizeof *value, 1, f) == 1; }

static int run_case(solve_function solve, const int reported[3], const char *path) {
    FILE *in = fopen(path, "rb");
    char magic[8];
    uint64_t n_blocks = 0, n_slots = 0;
    if (!in || fread(magic, 1, 8, in) != 8 || memcmp(magic, "EWBKCASE", 8) != 0
        || !read_u64(in, &n_blocks) || !read_u64(in, &n_slots) || n_blocks == 0) {
        fprintf(stderr, "%s: not a case file\n", path);
        if (in) fclose(in);
        return 1;
    }
    unsigned char **blocks = calloc(n_blocks, sizeof *blocks);
    uint64_t *sizes = calloc(n_blocks, sizeof *sizes);
    int status = 0;
    for (uint64_t b = 0; b < n_blocks && !status; b++) {
        status = !read_u64(in, &sizes[b]) || !(blocks[b] = calloc(sizes[b] + 16, 1))
                 || fread(blocks[b], 1, sizes[b], in) != sizes[b];
    }
    for (uint64_t s = 0; s < n_slots && !status; s++) {
        uint64_t block, offset, target;
        status = !read_u64(in, &block) || !read_u64(in, &offset) || !read_u64(in, &target)
                 || block >= n_blocks || target >= n_blocks || offset + sizeof(void *) > sizes[block];
        if (!status) {
            void *address = blocks[target];
            memcpy(blocks[block] + offset, &address, sizeof address);
        }
    }
    fclose(in);
    if (status) {
        fprintf(stderr, "%s: truncated or inconsistent case file\n", path);
    } else {
        int32_t header[4] = {reported[0], reported[1], reported[2], solve(blocks[0])};
        char out_path[4096];
        snprintf(out_path, sizeof out_path, "%s.out", path);
        FILE *out = fopen(out_path, "wb");
        status = !out || fwrite(header, sizeof header, 1, out) != 1;
        for (uint64_t b = 0; b < n_blocks && !status; b++) {
            status = fwrite(&sizes[b], sizeof sizes[b], 1, out) != 1 || fwrite(blocks[b], 1, sizes[b], out) != sizes[b];
        }
        if (out) fclose(out);
        if (status) fprintf(stderr, "%s: could not write the results\n", out_path);
    }
    for (uint64_t b = 0; b < n_blocks; b++) free(blocks[b]);
    free(blocks);
    free(sizes);
    return status;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: golden_runner LIBRARY CASE...\n");
        return 2;
    }
    void *library = open_library(argv[1]);
    if (!library) {
        fprintf(stderr, "%s: cannot load the library\n", argv[1]);
        return 1;
    }
    const char *names[3] = {"ewbik_abi_version", "ewbik_problem_size", "ewbik_limits_size"};
    int reported[3];
    for (int i = 0; i < 3; i++) {
        int_function query = (int_function)find_symbol(library, names[i]);
        if (!query) {
            fprintf(stderr, "%s: no %s\n", argv[1], names[i]);
            return 1;
        }
        reported[i] = query();
    }
    solve_function solve = (solve_function)find_symbol(library, "ewbik_solve");
    if (!solve) {
        fprintf(stderr, "%s: no ewbik_solve\n", argv[1]);
        return 1;
    }
    int failed = 0;
    for (int i = 2; i < argc; i++) failed |= run_case(solve, reported, argv[i]);
    return failed;
}
