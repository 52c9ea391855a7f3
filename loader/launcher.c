/* Which rank of which job this process is: the launchers' conventions. */
#include "launcher.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/error.h"

#define N_(a) (sizeof(a) / sizeof((a)[0]))

/* An environment integer; absent (or name NULL) leaves *out and returns
 * 0, malformed is an error naming `field`; 1 when it was read. */
static int env_int(const char *name, const char *field, int *out)
{
    const char *s = name ? getenv(name) : NULL;
    if (!s || !*s)
        return 0;
    char *end;
    errno = 0;
    const long v = strtol(s, &end, 10);
    if (*end != '\0' || errno || v < 0 || v > 1 << 20)
        return err_set(PL_EINVAL,
                       "pl_loader_create: config.%s: environment "
                       "variable %s=\"%s\" is not a valid count",
                       field, name, s);
    *out = (int)v;
    return 1;
}

/* The variables each launcher sets, in the order they are looked for. */
typedef struct launcher {
    const char *name;
    const char *rank, *world, *local_rank, *local_world;
} launcher;

static const launcher launchers[] = {
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
    /* SLURM's tasks on this node: SLURM_NTASKS_PER_NODE when --ntasks-per-
     * node was given, else this node's entry of SLURM_TASKS_PER_NODE. */
    {"SLURM", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID",
     "SLURM_NTASKS_PER_NODE"},
    {"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
     "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {"MPICH/PMI", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
};

static int is_set(const char *name)
{
    const char *v = getenv(name);
    return v && *v;
}

/* SLURM_TASKS_PER_NODE ("4(x2),3": four tasks on each of two nodes, then
 * three) at node SLURM_NODEID; 0 when either is missing or malformed. */
static int slurm_tasks_here(void)
{
    const char *spec = getenv("SLURM_TASKS_PER_NODE");
    const char *node = getenv("SLURM_NODEID");
    if (!spec || !node || !*node)
        return 0;
    long left = strtol(node, NULL, 10);
    while (*spec) {
        char *end;
        const long tasks = strtol(spec, &end, 10);
        long reps = 1;
        if (end == spec || tasks < 1)
            return 0;
        if (strncmp(end, "(x", 2) == 0) {
            reps = strtol(end + 2, &end, 10);
            if (*end++ != ')' || reps < 1)
                return 0;
        }
        if (left < reps)
            return tasks > 1 << 20 ? 0 : (int)tasks;
        left -= reps;
        spec = *end == ',' ? end + 1 : end;
        if (*end != ',' && *end)
            return 0;
    }
    return 0;
}

/* The node-local rank and size, where the launcher says. */
static int read_local(const launcher *L, launch *out)
{
    int rc = env_int(L->local_rank, "rank", &out->local_rank);
    if (rc >= 0)
        rc = env_int(L->local_world, "world_size", &out->local_world);
    if (rc == 0 && L == &launchers[1]) {
        const int here = slurm_tasks_here();
        if (here > 0)
            out->local_world = here;
    }
    if (rc < 0)
        return rc;
    if (out->local_world < 1 || out->local_rank >= out->local_world) {
        out->local_rank = 0;
        out->local_world = 1; /* inconsistent: not used */
    }
    return 0;
}

int launcher_read(launch *out)
{
    memset(out, 0, sizeof *out);
    out->world = out->local_world = 1;
    const launcher *L = NULL;
    for (size_t i = 0; i < N_(launchers) && !L; i++)
        if (is_set(launchers[i].rank) || is_set(launchers[i].world))
            L = &launchers[i];
    if (!L) {
        snprintf(out->source, sizeof out->source,
                 "defaults (no launcher variables)");
        return 0;
    }
    int rc;
    if ((rc = env_int(L->rank, "rank", &out->rank)) < 0 ||
        (rc = env_int(L->world, "world_size", &out->world)) < 0)
        return rc;
    if (!is_set(L->rank) || !is_set(L->world))
        return err_set(PL_EINVAL,
                       "pl_loader_create: config.%s: the environment sets %s "
                       "but not %s (%s's pair): set both, or neither",
                       is_set(L->rank) ? "world_size" : "rank",
                       is_set(L->rank) ? L->rank : L->world,
                       is_set(L->rank) ? L->world : L->rank, L->name);
    out->found = 1;
    snprintf(out->source, sizeof out->source, "%s (%s, %s)", L->name, L->rank,
             L->world);
    return read_local(L, out);
}
