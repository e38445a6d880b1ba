//! The `agentd` binary: everything lives in the library; see `agentd::cli`.

/// mimalloc instead of the system allocator: a request allocates many small short-lived
/// buffers across worker threads, where glibc malloc cost ~15% of the server's CPU. Built
/// without transparent huge pages (`no_thp`), which otherwise add ~25 KiB per open stream
/// (bench/README.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    agentd::cli::main()
}
