/* distc-run across machines: the launchers of a job meet in node 0's store.
 *
 * Before an attempt starts its ranks, every launcher waits for all the
 * others (so that none runs, or ends and takes the store down, alone). While
 * ranks run, the first launcher to see one fail says so, and every other
 * launcher stops its own ranks, even ranks in no collective that would never
 * notice. After the attempt, node 0 keeps the store up until every launcher
 * is done with it. Keys live under /distc-run/attempt_N/. */
#ifndef DISTC_RUN_NODES_H
#define DISTC_RUN_NODES_H

#include <distc.h>

typedef struct run_nodes {
    distc_store *store;
    int nnodes, node_rank;
    int lost; /* a store call failed: stop asking */
} run_nodes;

/* Waits until every node's launcher has joined this attempt, up to
 * timeout_ms; -1 (after saying why on stderr) when they did not. */
int run_nodes_join(run_nodes *j, int attempt, int timeout_ms);
/* Says, once per attempt, that one of this node's ranks failed: `what`. */
void run_nodes_announce(run_nodes *j, int attempt, const char *what);
/* What another node announced for this attempt (the caller frees it), or NULL. */
char *run_nodes_failure(run_nodes *j, int attempt);
/* Asks for traces (delta 1) or reads how many times they were asked (0);
 * -1 once the store is lost. Every launcher forwards a new ask to its ranks. */
long run_nodes_dumps(run_nodes *j, int attempt, int delta);
/* This node is done with the attempt; node 0 waits up to timeout_ms for the others. */
void run_nodes_finish(run_nodes *j, int attempt, int timeout_ms);

#endif
