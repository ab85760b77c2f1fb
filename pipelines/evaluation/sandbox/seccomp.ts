// The calculation sandbox's seccomp filter: a classic-BPF program (the raw little-endian bytes of a
// `struct sock_filter` array, 8 bytes an instruction) given to bubblewrap as `--seccomp FD`, or
// installed by a runner inside the sandbox with prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &sock_fprog).
// A deny list: Docker's default profile's refusals plus what a hostile native program in a calculation
// must not do (see other processes, reach kernel subsystems, make processes, namespaces or network
// sockets, hold kernel memory outside every limit). Everything else is allowed. Pure: no I/O, and the
// syscall numbers are a literal table (taken from the kernel's uapi headers, 6.1), since the machine that
// runs the tool need not have headers.

export type SeccompArch = 'x64' | 'arm64';

export interface SeccompOptions {
  arch: SeccompArch;
  /** false: execve and execveat refused too (installed by a runner after its interpreter started) */
  allowExec: boolean;
}

type ErrnoName = 'EPERM' | 'ENOSYS' | 'EAFNOSUPPORT';

// the same numbers on x86-64 and arm64 (asm-generic/errno-base.h, errno.h)
const ERRNO: Record<ErrnoName, number> = { EPERM: 1, ENOSYS: 38, EAFNOSUPPORT: 97 };

// linux/audit.h: what seccomp_data.arch says for each calling convention
const AUDIT_ARCH: Record<SeccompArch, number> = { x64: 0xc000003e, arm64: 0xc00000b7 };
// x86-64's x32 ABI: the same entry point, numbers with this bit set, a table of its own
const X32_SYSCALL_BIT = 0x40000000;

// classic BPF (linux/bpf_common.h): instruction classes, sizes, modes and operations, then the only four
// instructions used: load a 32-bit word at a fixed offset, compare or bit-test the accumulator against a
// constant, return a constant
const [BPF_LD, BPF_JMP, BPF_RET] = [0x00, 0x05, 0x06];
const [BPF_W, BPF_ABS, BPF_K] = [0x00, 0x20, 0x00];
const [BPF_JEQ, BPF_JSET] = [0x10, 0x40];
const LD_W_ABS = BPF_LD | BPF_W | BPF_ABS;
const JMP_JEQ_K = BPF_JMP | BPF_JEQ | BPF_K;
const JMP_JSET_K = BPF_JMP | BPF_JSET | BPF_K;
const RET_K = BPF_RET | BPF_K;

// linux/seccomp.h
const RET_KILL_PROCESS = 0x80000000;
const RET_ERRNO = 0x00050000;
const RET_ALLOW = 0x7fff0000;

// struct seccomp_data { int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6]; }: both
// architectures are little-endian, so an argument's low 32 bits are the first word of its slot
const DATA_NR = 0;
const DATA_ARCH = 4;
const DATA_ARG0_LOW = 16;

const CLONE_THREAD = 0x00010000;
// CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET
const CLONE_NAMESPACES = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000;
const AF_UNIX = 1;
const SOCK_STREAM = 1;
/** The type's own bits (SOCK_STREAM … SOCK_PACKET); SOCK_NONBLOCK and SOCK_CLOEXEC sit above them. */
const SOCK_TYPE_BITS = 0xf;

/**
 * Numbers of every call the filter names: [x86-64 (asm/unistd_64.h), arm64 (asm-generic/unistd.h)],
 * null where the architecture has no such call (arm64 has no fork, vfork, iopl, … at all).
 */
const SYSCALLS: Readonly<Record<string, readonly [number | null, number | null]>> = {
  ptrace: [101, 117],
  process_vm_readv: [310, 270],
  process_vm_writev: [311, 271],
  kcmp: [312, 272],
  pidfd_open: [434, 434],
  pidfd_getfd: [438, 438],
  pidfd_send_signal: [424, 424],
  process_madvise: [440, 440],
  process_mrelease: [448, 448],
  bpf: [321, 280],
  perf_event_open: [298, 241],
  userfaultfd: [323, 282],
  keyctl: [250, 219],
  add_key: [248, 217],
  request_key: [249, 218],
  mount: [165, 40],
  umount2: [166, 39],
  pivot_root: [155, 41],
  chroot: [161, 51],
  unshare: [272, 97],
  setns: [308, 268],
  mount_setattr: [442, 442],
  move_mount: [429, 429],
  open_tree: [428, 428],
  fsopen: [430, 430],
  fsconfig: [431, 431],
  fsmount: [432, 432],
  fspick: [433, 433],
  kexec_load: [246, 104],
  kexec_file_load: [320, 294],
  init_module: [175, 105],
  finit_module: [313, 273],
  delete_module: [176, 106],
  acct: [163, 89],
  swapon: [167, 224],
  swapoff: [168, 225],
  reboot: [169, 142],
  settimeofday: [164, 170],
  clock_settime: [227, 112],
  clock_adjtime: [305, 266],
  adjtimex: [159, 171],
  syslog: [103, 116],
  quotactl: [179, 60],
  quotactl_fd: [443, 443],
  open_by_handle_at: [304, 265],
  name_to_handle_at: [303, 264],
  fanotify_init: [300, 262],
  statmount: [457, 457],
  listmount: [458, 458],
  open_tree_attr: [467, 467],
  flock: [73, 32],
  inotify_init: [253, null],
  inotify_init1: [294, 26],
  setsockopt: [54, 208],
  getsockopt: [55, 209],
  sendmsg: [46, 211],
  sendmmsg: [307, 269],
  io_setup: [206, 0],
  io_destroy: [207, 1],
  io_getevents: [208, 4],
  io_submit: [209, 2],
  io_cancel: [210, 3],
  io_pgetevents: [333, 292],
  fadvise64: [221, 223],
  mincore: [27, 232],
  readahead: [187, 213],
  vmsplice: [278, 75],
  splice: [275, 76],
  tee: [276, 77],
  fcntl: [72, 25],
  lookup_dcookie: [212, 18],
  nfsservctl: [180, 42],
  personality: [135, 92],
  mbind: [237, 235],
  set_mempolicy: [238, 237],
  set_mempolicy_home_node: [450, 450],
  migrate_pages: [256, 238],
  move_pages: [279, 239],
  memfd_create: [319, 279],
  memfd_secret: [447, 447],
  shmget: [29, 194],
  shmat: [30, 196],
  shmctl: [31, 195],
  shmdt: [67, 197],
  msgget: [68, 186],
  msgsnd: [69, 189],
  msgrcv: [70, 188],
  msgctl: [71, 187],
  semget: [64, 190],
  semop: [65, 193],
  semctl: [66, 191],
  semtimedop: [220, 192],
  sysinfo: [99, 179],
  fork: [57, null],
  vfork: [58, null],
  iopl: [172, null],
  ioperm: [173, null],
  modify_ldt: [154, null],
  uselib: [134, null],
  ustat: [136, null],
  sysfs: [139, null],
  vhangup: [153, 58],
  _sysctl: [156, null],
  create_module: [174, null],
  get_kernel_syms: [177, null],
  query_module: [178, null],
  io_uring_setup: [425, 425],
  io_uring_enter: [426, 426],
  io_uring_register: [427, 427],
  clone3: [435, 435],
  clone: [56, 220],
  socket: [41, 198],
  socketpair: [53, 199],
  execve: [59, 221],
  execveat: [322, 281],
};

/** Refused outright with EPERM, grouped by why. */
const REFUSED: readonly string[] = [
  // reading, steering or signalling other processes (and comparing their kernel objects)
  ...['ptrace', 'process_vm_readv', 'process_vm_writev', 'kcmp', 'pidfd_open', 'pidfd_getfd', 'pidfd_send_signal'],
  ...['process_madvise', 'process_mrelease'],
  // kernel subsystems with a long record of exploits that no calculation needs
  ...['bpf', 'perf_event_open', 'userfaultfd', 'keyctl', 'add_key', 'request_key'],
  // mounts, roots and namespaces: the sandbox's shape is bubblewrap's to make, not the code's
  ...['mount', 'umount2', 'pivot_root', 'chroot', 'unshare', 'setns', 'mount_setattr', 'move_mount', 'open_tree'],
  ...['fsopen', 'fsconfig', 'fsmount', 'fspick', 'open_tree_attr'],
  // the mount table with the host's source paths (Linux 6.8 and later)
  ...['statmount', 'listmount'],
  // the bound runtime files are the host's inodes: a lock or a watch on them would signal between
  // calls at once and count every program the machine starts
  ...['flock', 'inotify_init', 'inotify_init1'],
  // the page cache of those files: evicting a page (fadvise) and seeing whether one is cached (mincore,
  // readahead) made a channel between calls at once
  ...['fadvise64', 'mincore', 'readahead'],
  // descriptors in flight (SCM_RIGHTS) and datagram bursts held gigabytes of kernel memory outside every
  // limit, and the in-flight count is the user's, shared by every call
  ...['sendmsg', 'sendmmsg'],
  // pages given to a pipe stay pinned after they are unmapped (a transparent huge page whole): 2.2 GB
  // held by a call limited to 2 GiB, its resident memory 18 MiB
  ...['vmsplice', 'splice', 'tee'],
  // the machine itself: kernel code, accounting, swap, power, clocks, the kernel log, quotas
  ...['kexec_load', 'kexec_file_load', 'init_module', 'finit_module', 'delete_module', 'acct', 'swapon', 'swapoff'],
  ...['reboot', 'settimeofday', 'clock_settime', 'clock_adjtime', 'adjtimex', 'syslog', 'quotactl', 'quotactl_fd'],
  // files by handle bypass the mount namespace's view; fanotify watches whole file systems; then two
  // calls the kernel has dropped, refused here whatever a kernel still has
  ...['open_by_handle_at', 'name_to_handle_at', 'fanotify_init', 'lookup_dcookie', 'nfsservctl'],
  // execution domains (turning off address randomisation) and NUMA placement of memory
  ...['personality', 'mbind', 'set_mempolicy', 'set_mempolicy_home_node', 'migrate_pages', 'move_pages'],
  // memory that is no file of the sandbox's and that no rlimit counts: memfd, SysV IPC
  ...['memfd_create', 'memfd_secret', 'shmget', 'shmat', 'shmctl', 'shmdt', 'msgget', 'msgsnd', 'msgrcv', 'msgctl'],
  ...['semget', 'semop', 'semctl', 'semtimedop'],
  // the host's load, uptime and free memory in one call (a mounted /proc still says them: bind no host procfs to hide them)
  'sysinfo',
  // new processes (clone is checked below: threads only)
  ...['fork', 'vfork'],
  // x86 I/O ports and descriptor tables, obsolete or removed calls (only where the table has them)
  ...['iopl', 'ioperm', 'modify_ldt', 'uselib', 'ustat', 'sysfs', 'vhangup'],
  ...['_sysctl', 'create_module', 'get_kernel_syms', 'query_module'],
];

/**
 * Answered "not implemented", so that callers fall back rather than fail: libuv and others to plain
 * system calls without io_uring; glibc from clone3, whose flags live in memory the filter cannot read,
 * to clone, whose flags it can.
 */
const NOT_IMPLEMENTED: readonly string[] = [
  ...['io_uring_setup', 'io_uring_enter', 'io_uring_register', 'clone3'],
  // the kernel's AIO contexts: one call could take every event of the machine (fs.aio-max-nr)
  ...['io_setup', 'io_destroy', 'io_getevents', 'io_submit', 'io_cancel', 'io_pgetevents'],
];
/** Refused as "address family not supported": no socket is made by `socket` (socketpair gives Unix stream pairs). */
const NO_FAMILY: readonly string[] = ['socket'];

const CLONE_WHEN = 'flags without CLONE_THREAD or with a namespace flag (low 32 bits of argument 0)';
const SOCKET_WHEN =
  'a domain other than AF_UNIX (EAFNOSUPPORT), or a type other than SOCK_STREAM (EPERM) (low 32 bits of argument 0, low 4 bits of argument 1)';
const GETSOCKOPT_WHEN = 'SOL_SOCKET with SO_PEERCRED, SO_PEERSEC, SO_PEERGROUPS or SO_PEERPIDFD (low 32 bits of arguments 1 and 2)';
/** SO_PEERCRED, SO_PEERSEC, SO_PEERGROUPS, SO_PEERPIDFD: the process at the other end of stdout is the host's supervisor. */
const PEER_OPTIONS = [17, 31, 59, 77] as const;
const SETSOCKOPT_WHEN =
  'SOL_SOCKET with SO_SNDBUF, SO_RCVBUF or their FORCE forms, SO_PASSCRED or SO_PASSPIDFD (low 32 bits of arguments 1 and 2)';
const SOL_SOCKET = 1;
/**
 * SO_SNDBUF, SO_RCVBUF, SO_SNDBUFFORCE, SO_RCVBUFFORCE (a Unix socket's buffer is kernel memory no limit
 * counts), SO_PASSCRED, SO_PASSPIDFD (the credentials and a pidfd of whatever writes to the socket next).
 */
const BUFFER_OPTIONS = [7, 8, 32, 33, 16, 76] as const;
const DATA_ARG1_LOW = 24;
const FCNTL_WHEN =
  'record locks (F_GETLK, F_SETLK, F_SETLKW and their OFD forms), leases and directory notices (low 32 bits of argument 1)';
/** F_GETLK, F_SETLK, F_SETLKW, F_OFD_GETLK, F_OFD_SETLK, F_OFD_SETLKW, F_SETLEASE, F_NOTIFY, F_SETPIPE_SZ. */
const FCNTL_REFUSED = [5, 6, 7, 36, 37, 38, 1024, 1026, 1031] as const;
const DATA_ARG2_LOW = 32;

/** The filter's architecture for this Node process (process.arch), or null where no filter is written (then the caller refuses to make a sandbox and says why). */
export function seccompArch(arch: string = process.arch): SeccompArch | null {
  return arch === 'x64' || arch === 'arm64' ? arch : null;
}

/** Syscall number of a name on an architecture (tests use it to probe). */
export function syscallNumber(arch: SeccompArch, name: string): number | undefined {
  if (!Object.hasOwn(SYSCALLS, name)) return undefined;
  return SYSCALLS[name]![arch === 'x64' ? 0 : 1] ?? undefined;
}

/** The unconditional refusals of these options, each call the architecture has, in filter order. */
function plainRefusals(options: SeccompOptions): { name: string; errno: ErrnoName }[] {
  const refused = [...REFUSED, 'execveat', ...(options.allowExec ? [] : ['execve'])];
  return [
    ...refused.map((name) => ({ name, errno: 'EPERM' as const })),
    ...NOT_IMPLEMENTED.map((name) => ({ name, errno: 'ENOSYS' as const })),
    ...NO_FAMILY.map((name) => ({ name, errno: 'EAFNOSUPPORT' as const })),
  ].filter(({ name }) => syscallNumber(options.arch, name) !== undefined);
}

/** The names of the refused system calls (for docs and tests), and for each its errno name. */
export function refusedSyscalls(options: SeccompOptions): { name: string; errno: string; when?: string }[] {
  return [
    ...plainRefusals(options),
    { name: 'clone', errno: 'EPERM', when: CLONE_WHEN },
    { name: 'socketpair', errno: 'EAFNOSUPPORT', when: SOCKET_WHEN },
    { name: 'setsockopt', errno: 'EPERM', when: SETSOCKOPT_WHEN },
    { name: 'getsockopt', errno: 'EPERM', when: GETSOCKOPT_WHEN },
    { name: 'fcntl', errno: 'EPERM', when: FCNTL_WHEN },
  ];
}

interface Instruction {
  code: number;
  jt: number;
  jf: number;
  k: number;
}

const load = (offset: number): Instruction => ({ code: LD_W_ABS, jt: 0, jf: 0, k: offset });
const jeq = (k: number, jt: number, jf: number): Instruction => ({ code: JMP_JEQ_K, jt, jf, k });
const jset = (k: number, jt: number, jf: number): Instruction => ({ code: JMP_JSET_K, jt, jf, k });
const ret = (k: number): Instruction => ({ code: RET_K, jt: 0, jf: 0, k });

function number(options: SeccompOptions, name: string): number {
  const nr = syscallNumber(options.arch, name);
  if (nr === undefined) throw new Error(`seccomp: ${name} has no number on ${options.arch}`);
  return nr;
}

/** A socket-option call (`nr`) refused (EPERM) at SOL_SOCKET for `refused` options, allowed otherwise. */
function socketOptions(nr: number, refused: readonly number[]): Instruction[] {
  return [
    jeq(nr, 0, refused.length + 5),
    load(DATA_ARG1_LOW),
    jeq(SOL_SOCKET, 0, refused.length + 1),
    load(DATA_ARG2_LOW),
    ...refused.map((option, k) => jeq(option, refused.length - k, 0)),
    ret(RET_ALLOW),
    ret(RET_ERRNO | ERRNO.EPERM),
  ];
}

/**
 * The instructions. Every check is a short block that ends in its own return, so jumps are 0 to 5
 * instructions long whatever the list's length (classic BPF's offsets are one byte). A jump counts
 * from the instruction after it.
 */
function program(options: SeccompOptions): Instruction[] {
  const out: Instruction[] = [
    // another calling convention (i386's int 0x80 on x86-64, arm32 on arm64) numbers calls differently:
    // this table would be wrong for it, so its first call is its last
    load(DATA_ARCH),
    jeq(AUDIT_ARCH[options.arch], 1, 0),
    ret(RET_KILL_PROCESS),
    load(DATA_NR),
  ];
  if (options.arch === 'x64') out.push(jset(X32_SYSCALL_BIT, 0, 1), ret(RET_KILL_PROCESS));
  for (const { name, errno } of plainRefusals(options)) out.push(jeq(number(options, name), 0, 1), ret(RET_ERRNO | ERRNO[errno]));
  // clone: a thread (CLONE_THREAD, which the kernel only takes with a shared address space) and no new
  // namespace. The kernel itself reads only the low 32 bits of clone's flags, so that is all we check.
  out.push(
    jeq(number(options, 'clone'), 0, 5),
    load(DATA_ARG0_LOW),
    jset(CLONE_NAMESPACES, 2, 0),
    jset(CLONE_THREAD, 0, 1),
    ret(RET_ALLOW),
    ret(RET_ERRNO | ERRNO.EPERM),
  );
  // socketpair: Unix stream pairs only (socket is refused outright, with the plain refusals). Network
  // buffers are kernel memory; netlink, packet and vsock sockets reach the host; datagram queues held
  // gigabytes. The domain and type are ints to the kernel: the low word is all of them.
  out.push(
    jeq(number(options, 'socketpair'), 0, 8),
    load(DATA_ARG0_LOW),
    jeq(AF_UNIX, 1, 0),
    ret(RET_ERRNO | ERRNO.EAFNOSUPPORT),
    load(DATA_ARG1_LOW),
    jset(SOCK_STREAM, 0, 2),
    jset(SOCK_TYPE_BITS & ~SOCK_STREAM, 1, 0),
    ret(RET_ALLOW),
    ret(RET_ERRNO | ERRNO.EPERM),
  );
  // setsockopt: a socket's buffers stay at the kernel's default size; getsockopt: nothing of the
  // process at the other end (stdout's peer is the host's supervisor: its pid, a pidfd of it)
  out.push(...socketOptions(number(options, 'setsockopt'), BUFFER_OPTIONS), ...socketOptions(number(options, 'getsockopt'), PEER_OPTIONS));
  // fcntl: no record lock, lease, directory notice or pipe growth (the bound runtime files are the host's:
  // a lock on one is a channel between calls at once; pipe pages are counted per user, across calls)
  out.push(
    jeq(number(options, 'fcntl'), 0, FCNTL_REFUSED.length + 3),
    load(DATA_ARG1_LOW),
    ...FCNTL_REFUSED.map((command, k) => jeq(command, FCNTL_REFUSED.length - k, 0)),
    ret(RET_ALLOW),
    ret(RET_ERRNO | ERRNO.EPERM),
  );
  out.push(ret(RET_ALLOW));
  return out;
}

/** The filter program's bytes (sock_filter array). Deterministic: same options, same bytes. */
export function seccompFilter(options: SeccompOptions): Buffer {
  if (seccompArch(options.arch) === null) throw new Error(`seccomp: no filter for architecture ${String(options.arch)}`);
  const instructions = program(options);
  const bytes = Buffer.alloc(instructions.length * 8);
  instructions.forEach(({ code, jt, jf, k }, i) => {
    // a jump past the end, or past a byte, would be refused by the kernel: say so here instead
    const jump = (code & 0x07) === BPF_JMP;
    if (jump && (jt > 255 || jf > 255 || i + 1 + Math.max(jt, jf) >= instructions.length)) throw new Error(`seccomp: bad jump at ${i}`);
    bytes.writeUInt16LE(code, i * 8);
    bytes.writeUInt8(jt, i * 8 + 2);
    bytes.writeUInt8(jf, i * 8 + 3);
    bytes.writeUInt32LE(k >>> 0, i * 8 + 4);
  });
  return bytes;
}
