#pragma once
// A command under a pool lease (docs/pool.md, "When a lease expires"): the node ends it once the lease
// has expired, whether or not the agent that holds it is still there to say so.
//
//   ferry-node lease-set FILE EXPIRES_AT
//     FILE (<cache>/leases/<lease-id>) now says the lease ends at EXPIRES_AT (seconds since the epoch),
//     written atomically (a temporary file renamed in the same directory, mode 0600; the directory made
//     when missing). It never moves an expiry earlier: a renewal that arrives after a later one leaves the
//     file as it is and exits 3. Exit 2 for a lease id that is not letters, digits and '-', or a value that
//     is not an integer; 1 when the file cannot be written.
//
//   ferry-node lease-run FILE [--grace SECONDS] -- ARGV...
//     Runs ARGV in a process group of its own and reads FILE at least every second (lease_watch.hpp); an
//     unreadable or garbled FILE keeps the value read before, but a FILE never read refuses to start (exit
//     2). Once the wall clock reaches the expiry: TERM to the group, KILL after the grace (default 5 s);
//     once the group has gone, one line on stderr, "ferry-node: lease LEASE expired at T: command ended",
//     and exit 124 (lease_expired_exit). TERM, INT and HUP that lease-run receives go to the group, with
//     the same grace before a KILL (ferry cancels a remote command by TERM to lease-run's own group, which
//     no longer holds the command's). Otherwise its exit is the command's: the same code, or, for a
//     command killed by a signal, that signal raised on itself; 127 when ARGV cannot be found, 126 when it
//     cannot be run. Should lease-run itself be KILLed first (ferry's own KILL after ssh.kill_grace, which
//     races lease-run's), the command's first process is KILLed with it; what that process started and left
//     behind a TERM it ignores is then out of reach, as with any command that leaves ferry's process group.
namespace ferry::agent::node {

// argv[0] is the program, argv[1] the subcommand.
int lease_run(int argc, char** argv);
int lease_set(int argc, char** argv);

}  // namespace ferry::agent::node
