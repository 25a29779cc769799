//! The seccomp deny list every contained command runs under.
//!
//! An allow-by-default filter that refuses (EPERM) the calls no tool needs and that would let it
//! reach past its sandbox: tracing other processes, mounting, loading kernel code, keyrings,
//! clock setting, new namespaces. Sockets are narrowed by family and type: raw and packet
//! sockets never; without a network grant no IP or netlink socket at all; with one, TCP is
//! narrowed to the granted ports by Landlock (so SCTP and MPTCP, which would go around it, stay
//! refused) and UDP is allowed (DNS); UNIX sockets only with `network.unix_sockets`. `clone3` answers
//! ENOSYS (its flags sit in memory a filter cannot read), so libc falls back to `clone`, whose
//! namespace flags the filter sees. Programs are compiled once per process with `seccompiler`.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen as Len, SeccompCmpOp as Op,
    SeccompCondition as Cond, SeccompFilter, SeccompRule, TargetArch,
};

/// Calls refused outright.
const DENIED: &[libc::c_long] = &[
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_chroot,
    libc::SYS_fsopen,
    libc::SYS_fsmount,
    libc::SYS_fsconfig,
    libc::SYS_move_mount,
    libc::SYS_open_tree,
    libc::SYS_mount_setattr,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_reboot,
    libc::SYS_settimeofday,
    libc::SYS_clock_settime,
    libc::SYS_clock_adjtime,
    libc::SYS_adjtimex,
    libc::SYS_unshare,
    libc::SYS_setns,
    libc::SYS_userfaultfd,
    libc::SYS_iopl,
    libc::SYS_ioperm,
    libc::SYS_acct,
    libc::SYS_quotactl,
    libc::SYS_lookup_dcookie,
    libc::SYS_open_by_handle_at,
    libc::SYS_name_to_handle_at,
    // io_uring submits socket and file operations that no syscall filter sees.
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_pidfd_getfd,
];

/// Namespace flags `clone` may not carry.
const NS_FLAGS: &[i32] = &[
    libc::CLONE_NEWUSER,
    libc::CLONE_NEWNS,
    libc::CLONE_NEWPID,
    libc::CLONE_NEWNET,
    libc::CLONE_NEWUTS,
    libc::CLONE_NEWIPC,
    libc::CLONE_NEWCGROUP,
];

/// The two programs a command loads: the deny list, and `clone3` → ENOSYS.
pub fn programs(network: bool, unix_sockets: bool) -> Vec<&'static BpfProgram> {
    static DENY: [OnceLock<BpfProgram>; 4] = [
        OnceLock::new(),
        OnceLock::new(),
        OnceLock::new(),
        OnceLock::new(),
    ];
    static CLONE3: OnceLock<BpfProgram> = OnceLock::new();
    let i = usize::from(network) * 2 + usize::from(unix_sockets);
    let deny = DENY[i].get_or_init(|| deny_list(network, unix_sockets));
    let clone3 = CLONE3.get_or_init(|| {
        let mut rules = BTreeMap::new();
        rules.insert(libc::SYS_clone3, vec![]);
        compile(rules, SeccompAction::Errno(libc::ENOSYS as u32))
    });
    vec![deny, clone3]
}

fn arch() -> TargetArch {
    #[cfg(target_arch = "x86_64")]
    {
        TargetArch::x86_64
    }
    #[cfg(target_arch = "aarch64")]
    {
        TargetArch::aarch64
    }
    #[cfg(target_arch = "riscv64")]
    {
        TargetArch::riscv64
    }
}

fn compile(rules: BTreeMap<i64, Vec<SeccompRule>>, on_match: SeccompAction) -> BpfProgram {
    let filter = SeccompFilter::new(rules, SeccompAction::Allow, on_match, arch())
        .expect("the deny list is a valid filter");
    filter.try_into().expect("the deny list compiles")
}

fn eq(arg: u8, value: u64) -> Cond {
    Cond::new(arg, Len::Dword, Op::Eq, value).expect("a valid condition")
}

fn rule(conds: Vec<Cond>) -> SeccompRule {
    SeccompRule::new(conds).expect("a valid rule")
}

fn deny_list(network: bool, unix_sockets: bool) -> BpfProgram {
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for &call in DENIED {
        rules.insert(call, vec![]);
    }
    rules.insert(
        libc::SYS_clone,
        NS_FLAGS
            .iter()
            .map(|&f| {
                rule(vec![Cond::new(
                    0,
                    Len::Qword,
                    Op::MaskedEq(f as u64),
                    f as u64,
                )
                .expect("a valid condition")])
            })
            .collect(),
    );
    // socket(domain, type, protocol): the low bits of `type` are the kind, the rest flags.
    let kind = |t: i32| Cond::new(1, Len::Dword, Op::MaskedEq(0xf), t as u64).expect("cond");
    let mut socket = vec![
        rule(vec![eq(0, libc::AF_PACKET as u64)]),
        rule(vec![eq(0, libc::AF_INET as u64), kind(libc::SOCK_RAW)]),
        rule(vec![eq(0, libc::AF_INET6 as u64), kind(libc::SOCK_RAW)]),
    ];
    if network {
        // TCP goes through Landlock's port rules; SCTP and MPTCP would go around them.
        for family in [libc::AF_INET, libc::AF_INET6] {
            for proto in [libc::IPPROTO_SCTP, libc::IPPROTO_MPTCP] {
                socket.push(rule(vec![eq(0, family as u64), eq(2, proto as u64)]));
            }
        }
    } else {
        // No network granted: no IP socket of any kind (TCP is refused here and by Landlock).
        for family in [libc::AF_INET, libc::AF_INET6, libc::AF_NETLINK] {
            socket.push(rule(vec![eq(0, family as u64)]));
        }
    }
    if !unix_sockets {
        socket.push(rule(vec![eq(0, libc::AF_UNIX as u64)]));
    }
    rules.insert(libc::SYS_socket, socket);
    compile(rules, SeccompAction::Errno(libc::EPERM as u32))
}
