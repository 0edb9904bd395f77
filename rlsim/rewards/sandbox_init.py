"""The first process inside a sandbox: locks the filesystem, sets limits, drops privileges, runs the program.

Run by ``rlsim.rewards.sandbox`` as ``unshare --user --map-root-user --mount --net --pid --fork --kill-child
--mount-proc python -I -S sandbox_init.py SPEC_JSON``, so it starts as root of fresh user, mount, network and
PID namespaces (root of nothing outside them). It then

1. makes the work folder a mount of its own, kept writable, and remounts every other mount read-only
   (a write outside the folder fails with EROFS);
2. joins the host's pids cgroup for it (as root, which RLIMIT_NPROC exempts) and sets the resource limits:
   CPU seconds, address space, processes, file size, no core files;
3. drops every capability (bounding set, ambient, effective, permitted, inheritable) and sets no_new_privs,
   so the program cannot remount anything writable again or regain privileges through exec;
4. replaces itself with the program (PID 1 of the namespace: when it ends, or the host kills it at the wall
   clock, the kernel kills every process it started).

The network namespace has only a loopback device that is down, so any connect fails. Standard library only;
it runs before ``site`` is imported.
"""

import ctypes
import ctypes.util
import json
import os
import resource
import sys

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_NOATIME, MS_NODIRATIME, MS_REC, MS_RELATIME = 32, 4096, 1024, 2048, 16384, 1 << 21
# statvfs flag -> the mount flag a remount must keep (the kernel refuses to clear a locked one)
KEPT_FLAGS = {2: MS_NOSUID, 4: MS_NODEV, 8: MS_NOEXEC, 1024: MS_NOATIME, 2048: MS_NODIRATIME, 4096: MS_RELATIME}
# pseudo filesystems: not data, and some refuse a read-only remount; everything else must become read-only
PSEUDO = {"proc", "sysfs", "cgroup", "cgroup2", "devpts", "mqueue", "bpf", "tracefs", "debugfs", "securityfs",
          "pstore", "fusectl", "configfs", "autofs", "binfmt_misc", "hugetlbfs", "nsfs"}  # fmt: skip
PR_SET_NO_NEW_PRIVS, PR_CAPBSET_DROP, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 38, 24, 47, 4
SETUP_FAILED = 125  # exit code that tells the host the sandbox itself could not be set up

libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)


def fail(message):
    sys.stderr.write(f"rlsim sandbox: {message}\n")
    os._exit(SETUP_FAILED)


def mount(source, target, fstype, flags):
    enc = [None if x is None else x.encode() for x in (source, target, fstype)]
    if libc.mount(enc[0], enc[1], enc[2], ctypes.c_ulong(flags), None) != 0:
        return os.strerror(ctypes.get_errno())
    return None


def mounts():
    """(mount point, filesystem type) of every mount, from /proc/self/mountinfo."""
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, right = line.split(" - ", 1)
            point = left.split()[4].replace("\\040", " ")
            out.append((point, right.split()[0]))
    return out


def lock_filesystem(workdir):
    error = mount(workdir, workdir, None, MS_BIND | MS_REC)
    if error:
        fail(f"cannot bind the work folder {workdir}: {error}")
    for point, fstype in mounts():
        if point == workdir or point.startswith(workdir + "/"):
            continue
        try:
            kept = sum(ms for st, ms in KEPT_FLAGS.items() if os.statvfs(point).f_flag & st)
        except OSError:
            continue  # hidden under another mount: unreachable anyway
        error = mount(None, point, None, MS_REMOUNT | MS_BIND | MS_RDONLY | kept)
        if error and fstype not in PSEUDO:
            fail(f"cannot make {point} ({fstype}) read-only: {error}")


def join_cgroup(path):
    """Move this process into the host's pids cgroup for this sandbox (as root, where RLIMIT_NPROC is not applied)."""
    try:
        with open(os.path.join(path, "cgroup.procs"), "w") as f:
            f.write("0")  # 0: the writing process
    except OSError as err:
        fail(f"cannot join the process-limit cgroup {path}: {err}")


def set_limits(spec):
    cpu = int(spec["cpu_s"] + 0.999)
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))  # SIGXCPU at the soft limit, SIGKILL a second later
    memory = spec["memory_mb"] << 20
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    # for a non-root user, counted per user namespace (Linux >= 5.14 ucounts): only this sandbox's processes count
    resource.setrlimit(resource.RLIMIT_NPROC, (spec["max_processes"], spec["max_processes"]))
    size = spec["max_file_mb"] << 20
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def drop_privileges():
    for cap in range(64):
        libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)  # EINVAL past the last capability: ignored
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        fail(f"cannot set no_new_privs: {os.strerror(ctypes.get_errno())}")
    header, data = _CapHeader(0x20080522, 0), (_CapData * 2)()  # _LINUX_CAPABILITY_VERSION_3
    if libc.capset(ctypes.byref(header), data) != 0:
        fail(f"cannot drop capabilities: {os.strerror(ctypes.get_errno())}")


def main():
    spec = json.loads(sys.argv[1])
    workdir = spec["workdir"]
    if spec["isolate"]:
        if spec.get("cgroup"):
            join_cgroup(spec["cgroup"])
        lock_filesystem(workdir)
        set_limits(spec)
        drop_privileges()
    os.chdir(workdir)
    env = {"PATH": "/usr/bin:/bin", "HOME": workdir, "TMPDIR": workdir, "LANG": "C.UTF-8", "OMP_NUM_THREADS": "1",
           "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1"}  # fmt: skip
    argv = spec["argv"]
    try:
        os.execve(argv[0], argv, env)
    except OSError as err:
        fail(f"cannot run {argv[0]}: {err}")


main()
