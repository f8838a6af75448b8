/*
 * _mpi_build.h - the MPI a shim is compiled against, from the MPI headers'
 * own macros (BUILD_FAMILY: the ABI, "mpich" or "openmpi"; BUILD_VERSION).
 * Shared by the MPI binding shims; included after <mpi.h>.
 */
#ifndef BURSTBENCH_MPI_BUILD_H
#define BURSTBENCH_MPI_BUILD_H

#define STR_(x) #x
#define STR(x) STR_(x)

#if defined(OMPI_MAJOR_VERSION)
#define BUILD_FAMILY "openmpi"
#define BUILD_VERSION                                                                        \
    "Open MPI " STR(OMPI_MAJOR_VERSION) "." STR(OMPI_MINOR_VERSION) "." STR(OMPI_RELEASE_VERSION)
#elif defined(I_MPI_VERSION)
#define BUILD_FAMILY "mpich"
#define BUILD_VERSION "Intel MPI " I_MPI_VERSION
#elif defined(MVAPICH2_VERSION)
#define BUILD_FAMILY "mpich"
#define BUILD_VERSION "MVAPICH2 " MVAPICH2_VERSION
#elif defined(MPICH_VERSION)
#define BUILD_FAMILY "mpich"
#define BUILD_VERSION "MPICH " MPICH_VERSION
#else
#define BUILD_FAMILY "unknown"
#define BUILD_VERSION "unknown MPI"
#endif


static PyObject *mpi_build_dict(void)
{
    return Py_BuildValue("{s:s,s:s,s:i,s:i}", "family", BUILD_FAMILY, "version", BUILD_VERSION,
                         "standard_version", MPI_VERSION, "standard_subversion",
                         MPI_SUBVERSION);
}

#endif
