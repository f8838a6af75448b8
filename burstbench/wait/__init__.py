"""The on-premise queue's wait, predicted at each job's submit from what the scheduler knew
then: EASY backfilling simulated (easy: a whole log re-run, and the scheduler's own forward
estimate), the history of the waits of jobs that had started (history), and the two combined
into a calibrated distribution of each job's wait (predict)."""
