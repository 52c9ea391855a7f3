/* Which rank of which job this process is, as its launcher's environment
 * says: the first family whose rank or world variable is set, of torchrun
 * (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE), SLURM (SLURM_PROCID,
 * SLURM_NTASKS, SLURM_LOCALID, SLURM_NTASKS_PER_NODE or
 * SLURM_TASKS_PER_NODE), Open MPI (OMPI_COMM_WORLD_*) and MPICH/PMI
 * (PMI_RANK, PMI_SIZE, MPI_LOCALRANKID, MPI_LOCALNRANKS). Discovery only:
 * config.c decides what the config takes from it. */
#ifndef PINLOAD_LAUNCHER_H
#define PINLOAD_LAUNCHER_H

typedef struct launch {
    int found;                   /* a family's variables are set */
    int rank, world;             /* its pair (0 and 1 when none is) */
    int local_rank, local_world; /* on this node; 0 and 1 when unknown */
    /* "torchrun (RANK, WORLD_SIZE)", or "defaults (no launcher variables)",
     * for the create notice. */
    char source[96];
} launch;

/* Read the environment into *out. PL_EINVAL, naming the config field and
 * the variables, when a family's pair is half set or a value is not a
 * count. */
int launcher_read(launch *out);

#endif
