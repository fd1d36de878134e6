"""The machine under the benchmark: sysfs/procfs access, topology, governor/boost, counters, env info.

One module per concern:

* ``sysfs``      roots ($RINGLAB_SYSFS / $RINGLAB_PROCFS), read/write, CPU lists
* ``topology``   CPU topology, pair classes, ``select_pairs`` for the ``cpus`` parameter
* ``knobs``      the governor and boost knobs: show, apply, restore
* ``governor``   tuning the knobs for a run, with a checked state file for restore after SIGKILL
* ``procstat``   /proc/stat steal ticks, load average, busiest processes, kernel cmdline
* ``perfprobe``  which perf_event_open counters open here, paranoid level, tracepoints
* ``privilege``  under root: compiles and trials as the unprivileged user (setpriv), who ran what
* ``envinfo``    everything above (plus compiler, packages, virtualization) for ``ringlab env``

Submodules are imported on use, so ``import ringlab.system`` stays cheap.
"""
