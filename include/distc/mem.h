/**
 * @file distc/mem.h
 * @brief Memory that the ranks of one host reach without copies through the kernel.
 *
 * A buffer from distc_mem_alloc() is shared memory (a memfd of its own) that
 * a peer process on the same host maps the first time a collective or a
 * message names it.
 * The shared-memory transport's large collectives read and write peers'
 * buffers where they lie: for ordinary memory the kernel copies them
 * (process_vm_readv/writev, which pins every page), for this memory the
 * ranks copy and reduce with plain loads and stores, several times faster
 * for large messages. Like NCCL's ncclMemAlloc and MPI's MPI_Alloc_mem, it is
 * an optimisation only: any buffer works with every call, results are the
 * same bits, and a peer that cannot map this memory (a container that
 * forbids reading its processes' memory) falls back to the kernel's copies.
 *
 * It pays where every rank's buffer of a collective is such memory, from
 * the sizes at which the collectives copy in place: tens of KiB where the
 * kernel copies quickly; elsewhere from 1 MiB, where the ranks first learn
 * that all their buffers are shared. A message sent from it (32 KiB or more; 256 KiB where the
 * kernel copies slowly) is copied once by its receiver with memcpy. The DDP
 * reducer puts its host buckets in it by itself. A child process forked
 * after an allocation shares it rather than getting a copy.
 *
 * Thread-safety: both functions may be called from any thread.
 */
#ifndef DISTC_MEM_H
#define DISTC_MEM_H

#include "common.h"

DISTC_BEGIN_DECL

/**
 * Allocates `bytes` of zeroed memory, page-aligned, that the collectives of
 * any process group share with the other ranks of this host without the
 * kernel's copies. Each allocation holds one file descriptor and a page more
 * than asked, so it is meant for buffers of at least tens of KiB that live
 * long (gradient buckets, parameters, activations exchanged every step).
 * Release it with distc_mem_free(), never with free().
 * @param out receives the memory's address; set to NULL on failure.
 * @param bytes at least 1, at most 2^44.
 * @return 0, DISTC_EINVAL (`out` NULL, `bytes` 0 or too large), DISTC_ENOMEM
 * (the memory or a file descriptor could not be had) or DISTC_EIO (the
 * system has no memfd_create).
 */
DISTC_EXTERN(int) distc_mem_alloc(void **out, size_t bytes);

/**
 * Releases memory from distc_mem_alloc(). NULL is a no-op. Peers that
 * mapped it unmap it at the next collective that names another buffer of
 * this rank's; the memory goes once the last of them did.
 * No operation may still use it (an asynchronous one must have completed).
 * @return 0, or DISTC_EINVAL when `ptr` is not the start of live memory from
 * distc_mem_alloc() (a pointer into it, one freed already, or any other).
 */
DISTC_EXTERN(int) distc_mem_free(void *ptr);

DISTC_END_DECL

#endif /* DISTC_MEM_H */
