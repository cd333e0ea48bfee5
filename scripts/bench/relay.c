/* The floor of an MCP proxy over stdio: a bare byte relay with the same two extra process hops
 * as `toolbrake mcp`, and nothing else. It starts the server given after `--` with its stdin
 * and stdout on pipes (stderr inherited), then copies its own stdin to the server and the
 * server's stdout to its own stdout with poll + read + write: no parsing, no buffering beyond
 * one read, no threads. scripts/bench/mcp.sh builds it with `cc -O2` and mcp_latency.js times
 * it beside a direct connection and the proxy.
 *
 * Usage: relay -- COMMAND [ARGS...]
 * Exits when the server closes its stdout, with the server's exit status. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Writes all of buf; 0 on success, -1 when the other end is gone. */
static int write_all(int fd, const char *buf, size_t len) {
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3 || strcmp(argv[1], "--") != 0) {
        fprintf(stderr, "usage: relay -- COMMAND [ARGS...]\n");
        return 2;
    }
    int to_child[2], from_child[2];
    if (pipe(to_child) != 0 || pipe(from_child) != 0) {
        perror("relay: pipe");
        return 1;
    }
    /* A client that goes away must not kill the relay mid-write: write() reports EPIPE. */
    signal(SIGPIPE, SIG_IGN);
    pid_t pid = fork();
    if (pid < 0) {
        perror("relay: fork");
        return 1;
    }
    if (pid == 0) {
        dup2(to_child[0], 0);
        dup2(from_child[1], 1);
        close(to_child[0]);
        close(to_child[1]);
        close(from_child[0]);
        close(from_child[1]);
        signal(SIGPIPE, SIG_DFL);
        execvp(argv[2], argv + 2);
        fprintf(stderr, "relay: cannot run %s: %s\n", argv[2], strerror(errno));
        _exit(127);
    }
    close(to_child[0]);
    close(from_child[1]);
    int child_in = to_child[1], child_out = from_child[0];

    static char buf[1 << 16];
    struct pollfd fds[2] = {{.fd = 0, .events = POLLIN}, {.fd = child_out, .events = POLLIN}};
    for (;;) {
        int r = poll(fds, 2, -1);
        if (r < 0) {
            if (errno == EINTR) continue;
            perror("relay: poll");
            break;
        }
        if (fds[0].revents) {
            ssize_t n = read(0, buf, sizeof buf);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0 || write_all(child_in, buf, (size_t)n) != 0) {
                /* The client closed (or the server stopped reading): the server sees EOF. */
                close(child_in);
                fds[0].fd = -1;
            }
        }
        if (fds[1].revents) {
            ssize_t n = read(child_out, buf, sizeof buf);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0 || write_all(1, buf, (size_t)n) != 0) break;
        }
    }
    if (fds[0].fd >= 0) close(child_in);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
