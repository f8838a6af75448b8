"""A centre's year of jobs, replayed: an accounting log (SWF, sacct, PBS Pro) read into one
table (logs), burst policies decided at each submit from the rebuilt queue state and each
burst job priced on every VM with the burst decision's time and whole cost (policy, run), the
report's figure and tables (report), the ``burstbench replay`` command (command)."""
