/*
 * floor-libssh: the SSH floor from one process with libssh (bench/README.md, "The floor"),
 * the second method beside bench/floor-ssh2 (libssh2, kwin's library): a different SSH
 * implementation measuring the same thing.
 *
 *   floor-libssh --key KEY --known-hosts FILE [--user root] [--command true] [--parallel K]
 *                ADDR[:PORT]...
 *
 * One thread per host, all started at once (--parallel K: K threads taking the next host in
 * turn): TCP connect, key exchange curve25519-sha256 only, host key ssh-ed25519 checked against
 * FILE (OpenSSH known_hosts; no ~/.ssh/config or global files read), public-key login with KEY,
 * one session channel that execs the command, its output read to the end, exit status checked.
 * Prints {"hosts":N,"ok":K,"failed":[...]} and exits 0 only if every host succeeded.
 *
 * Build (bench/run.sh does): apt-get install libssh-dev gcc;
 *   gcc -O2 -Wall -o target/floor-libssh bench/floor-libssh/floor-libssh.c -lssh -lpthread
 */
#include <libssh/libssh.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct host {
    char addr[256];
    unsigned int port;
    char err[512];
    int ok;
};

static const char *key_file, *known_hosts, *user = "root", *command = "true";
static struct host *hosts;
static int nhosts;
static atomic_int next_host;

static int one(struct host *h) {
    ssh_session s = ssh_new();
    ssh_key pk = NULL;
    ssh_channel ch = NULL;
    int rc = -1, status;
    long timeout = 120;
    bool no = false;
    char buf[4096];
    const char *kex;
    if (!s) { snprintf(h->err, sizeof h->err, "ssh_new failed"); return -1; }
    ssh_options_set(s, SSH_OPTIONS_PROCESS_CONFIG, &no);
    ssh_options_set(s, SSH_OPTIONS_HOST, h->addr);
    ssh_options_set(s, SSH_OPTIONS_PORT, &h->port);
    ssh_options_set(s, SSH_OPTIONS_USER, user);
    ssh_options_set(s, SSH_OPTIONS_TIMEOUT, &timeout);
    ssh_options_set(s, SSH_OPTIONS_KNOWNHOSTS, known_hosts);
    ssh_options_set(s, SSH_OPTIONS_GLOBAL_KNOWNHOSTS, "/dev/null");
    if (ssh_options_set(s, SSH_OPTIONS_KEY_EXCHANGE, "curve25519-sha256,curve25519-sha256@libssh.org") != SSH_OK ||
        ssh_options_set(s, SSH_OPTIONS_HOSTKEYS, "ssh-ed25519") != SSH_OK) {
        snprintf(h->err, sizeof h->err, "options: %s", ssh_get_error(s));
        goto out;
    }
    if (ssh_connect(s) != SSH_OK) {
        snprintf(h->err, sizeof h->err, "connect: %s", ssh_get_error(s));
        goto out;
    }
    kex = ssh_get_kex_algo(s);
    if (!kex || strncmp(kex, "curve25519-sha256", 17) != 0) {
        snprintf(h->err, sizeof h->err, "key exchange was %s", kex ? kex : "?");
        goto out;
    }
    if (ssh_session_is_known_server(s) != SSH_KNOWN_HOSTS_OK) {
        snprintf(h->err, sizeof h->err, "host key not the known one (%s)", known_hosts);
        goto out;
    }
    if (ssh_pki_import_privkey_file(key_file, NULL, NULL, NULL, &pk) != SSH_OK) {
        snprintf(h->err, sizeof h->err, "cannot read key %s", key_file);
        goto out;
    }
    if (ssh_userauth_publickey(s, NULL, pk) != SSH_AUTH_SUCCESS) {
        snprintf(h->err, sizeof h->err, "auth: %s", ssh_get_error(s));
        goto out;
    }
    ch = ssh_channel_new(s);
    if (!ch || ssh_channel_open_session(ch) != SSH_OK || ssh_channel_request_exec(ch, command) != SSH_OK) {
        snprintf(h->err, sizeof h->err, "exec: %s", ssh_get_error(s));
        goto out;
    }
    for (int err = 0; err < 2; err++)
        while (ssh_channel_read(ch, buf, sizeof buf, err) > 0) {
        }
    status = ssh_channel_get_exit_status(ch);
    if (status != 0) {
        snprintf(h->err, sizeof h->err, "exit status %d", status);
        goto out;
    }
    rc = 0;
out:
    if (ch) {
        ssh_channel_close(ch);
        ssh_channel_free(ch);
    }
    if (pk) ssh_key_free(pk);
    ssh_disconnect(s);
    ssh_free(s);
    return rc;
}

static void *worker(void *arg) {
    (void)arg;
    for (;;) {
        int i = atomic_fetch_add(&next_host, 1);
        if (i >= nhosts) return NULL;
        hosts[i].ok = one(&hosts[i]) == 0;
    }
}

static int usage(void) {
    fprintf(stderr, "usage: floor-libssh --key KEY --known-hosts FILE [--user USER] [--command CMD] "
                    "[--parallel K] ADDR[:PORT]...\n");
    return 2;
}

int main(int argc, char **argv) {
    int parallel = 0, ok = 0, first = 1;
    hosts = calloc((size_t)argc, sizeof *hosts);
    if (!hosts) return 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--key") && i + 1 < argc) key_file = argv[++i];
        else if (!strcmp(a, "--known-hosts") && i + 1 < argc) known_hosts = argv[++i];
        else if (!strcmp(a, "--user") && i + 1 < argc) user = argv[++i];
        else if (!strcmp(a, "--command") && i + 1 < argc) command = argv[++i];
        else if (!strcmp(a, "--parallel") && i + 1 < argc) parallel = atoi(argv[++i]);
        else if (a[0] == '-') return usage();
        else {
            struct host *h = &hosts[nhosts++];
            const char *c = strrchr(a, ':');
            size_t len = c ? (size_t)(c - a) : strlen(a);
            if (len >= sizeof h->addr) return usage();
            memcpy(h->addr, a, len);
            h->port = c ? (unsigned)atoi(c + 1) : 22;
        }
    }
    if (!key_file || !known_hosts || nhosts == 0) return usage();
    if (parallel <= 0 || parallel > nhosts) parallel = nhosts;
    if (ssh_init() != SSH_OK) return 1;
    pthread_t *t = calloc((size_t)parallel, sizeof *t);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    int started = 0;
    for (int i = 0; i < parallel; i++)
        if (pthread_create(&t[i], &attr, worker, NULL) == 0) started++;
    if (started == 0) worker(NULL);
    for (int i = 0; i < started; i++) pthread_join(t[i], NULL);
    printf("{\"hosts\":%d,\"ok\":", nhosts);
    for (int i = 0; i < nhosts; i++) ok += hosts[i].ok;
    printf("%d,\"failed\":[", ok);
    for (int i = 0; i < nhosts; i++) {
        if (hosts[i].ok) continue;
        printf("%s\"%s:%u: ", first ? "" : ",", hosts[i].addr, hosts[i].port);
        for (const char *p = hosts[i].err; *p; p++) {
            if (*p == '"' || *p == '\\') putchar('\\');
            putchar((unsigned char)*p >= 0x20 ? *p : ' ');
        }
        putchar('"');
        first = 0;
    }
    printf("]}\n");
    ssh_finalize();
    return ok == nhosts ? 0 : 1;
}
