/*
 * tls_config_test.c DIR - every bad security setting is refused by lite_init with
 * -LITE_ERR_CONFIG (or -LITE_ERR_NO_TRANSPORT for a transport that cannot encrypt), and the
 * detail names the key and the path. DIR holds the files of gen_certs.sh. One rank, no peers.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "litetx/litetx.h"

static const char *dir;
static int failures;

static const char *f(const char *name)
{
    static char buf[8][512];
    static int next;
    char *b = buf[next++ % 8];
    snprintf(b, 512, "%s/%s", dir, name);
    return b;
}

static lite_config_t base(const char *mode)
{
    lite_config_t c = lite_config_default();
    c.rank = 0;
    c.world_size = 1;
    c.root = "127.0.0.1:1";
    c.transport = "tcp";
    c.security = mode;
    if (mode && !strcmp(mode, "ca")) {
        c.security_cert = f("rank0.pem");
        c.security_key = f("rank0.key");
        c.security_ca = f("ca.pem");
    } else if (mode && !strcmp(mode, "psk")) {
        c.security_psk = f("psk.hex");
    }
    return c;
}

/* lite_init(c) must fail with `code` and a detail holding every one of the strings. */
static void expect(const char *what, lite_config_t c, int code, const char *s1, const char *s2)
{
    lite_ctx_t *ctx = NULL;
    int rc = lite_init(&c, &ctx);
    const char *d = lite_init_error();
    bool ok = rc == code && (!s1 || strstr(d, s1)) && (!s2 || strstr(d, s2));
    printf("%-28s rc=%d %s: %s\n", what, rc, ok ? "ok" : "WRONG", d);
    if (!ok)
        failures++;
    if (ctx)
        lite_finalize(ctx);
}

static void expect_ok(const char *what, lite_config_t c)
{
    lite_ctx_t *ctx = NULL;
    int rc = lite_init(&c, &ctx);
    bool ok = rc == 0 && !strcmp(lite_transport_name(ctx), "tcp");
    printf("%-28s rc=%d %s %s\n", what, rc, ok ? "ok" : "WRONG", rc ? lite_init_error() : "");
    if (!ok)
        failures++;
    lite_finalize(ctx);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    dir = argv[1];
    const int CFG = -LITE_ERR_CONFIG;
    lite_config_t c;

    expect_ok("ca: good files", base("ca"));
    expect_ok("psk: good file", base("psk"));
    c = base("ca");
    c.transport = "auto";
    expect_ok("ca: auto picks tcp", c);

    c = base("tls13");
    expect("mode: unknown", c, CFG, "lite_config_t.security", "tls13");
    c = base("ca");
    c.security_key = NULL;
    expect("ca: key not set", c, CFG, "security_key", "LITETX_SECURITY_KEY");
    c = base("ca");
    c.security_cert = f("nonexistent.pem");
    expect("cert: missing", c, CFG, "security_cert", f("nonexistent.pem"));
    c = base("ca");
    c.security_cert = dir;
    expect("cert: a directory", c, CFG, "security_cert", dir);
    c = base("ca");
    c.security_cert = f("garbage.pem");
    expect("cert: not PEM", c, CFG, "security_cert", f("garbage.pem"));
    c = base("ca");
    c.security_key = f("garbage.pem");
    expect("key: not PEM", c, CFG, "security_key", f("garbage.pem"));
    c = base("ca");
    c.security_ca = f("garbage.pem");
    expect("ca: not PEM", c, CFG, "security_ca", f("garbage.pem"));
    c = base("ca");
    c.security_key = f("mismatch.key");
    expect("key: not the cert's", c, CFG, "security_key", f("mismatch.key"));
    c = base("ca");
    c.security_cert = f("expired.pem");
    c.security_key = f("expired.key");
    expect("cert: expired", c, CFG, "expired", f("expired.pem"));
    c = base("ca");
    c.security_cert = f("other0.pem");
    c.security_key = f("other0.key");
    expect("cert: another CA", c, CFG, "security_ca", f("other0.pem"));
    c = base("ca");
    c.security_cert = f("norank.pem");
    c.security_key = f("norank.key");
    expect("cert: names no rank", c, CFG, "names no rank", f("norank.pem"));
    c = base("ca");
    c.security_cert = f("rank1.pem");
    c.security_key = f("rank1.key");
    expect("cert: another rank's", c, CFG, "rank 1's certificate", f("rank1.pem"));
    c = base("psk");
    c.security_psk = f("psk_short.hex");
    expect("psk: too short", c, CFG, "security_psk", f("psk_short.hex"));
    c = base("psk");
    c.security_psk = f("garbage.pem");
    expect("psk: not hex", c, CFG, "security_psk", f("garbage.pem"));
    c = base("psk");
    c.security_psk = f("nonexistent.hex");
    expect("psk: missing", c, CFG, "security_psk", f("nonexistent.hex"));
    if (geteuid() != 0) { /* root reads any file */
        char path[512];
        snprintf(path, sizeof(path), "%s/unreadable.pem", dir);
        FILE *fp = fopen(path, "w");
        if (fp) {
            fclose(fp);
            chmod(path, 0);
            c = base("ca");
            c.security_cert = path;
            expect("cert: unreadable", c, CFG, "security_cert", path);
        }
    }

    /* The same checks through the environment and a JSON file: the source is named. */
    setenv("LITETX_SECURITY", "ca", 1);
    setenv("LITETX_SECURITY_CERT", f("expired.pem"), 1);
    setenv("LITETX_SECURITY_KEY", f("expired.key"), 1);
    setenv("LITETX_SECURITY_CA", f("ca.pem"), 1);
    c = base(NULL);
    expect("env: expired", c, CFG, "LITETX_SECURITY_CERT", f("expired.pem"));
    unsetenv("LITETX_SECURITY");
    unsetenv("LITETX_SECURITY_CERT");
    unsetenv("LITETX_SECURITY_KEY");
    unsetenv("LITETX_SECURITY_CA");
    char json[512];
    snprintf(json, sizeof(json), "%s/bad.json", dir);
    FILE *fp = fopen(json, "w");
    fprintf(fp, "{\"security\": \"psk\", \"security_psk\": \"%s\"}\n", f("psk_short.hex"));
    fclose(fp);
    c = base(NULL);
    c.config_file = json;
    expect("file: short psk", c, CFG, "config file", f("psk_short.hex"));
    fp = fopen(json, "w");
    fprintf(fp, "{\"security\": \"tls\"}\n");
    fclose(fp);
    expect("file: unknown mode", c, CFG, "\"security\"", "tls");

    /* Transports that cannot encrypt refuse to start, named or not. */
    static const char *const plain[] = {"efa", "rdma", "loop"};
    for (size_t i = 0; i < sizeof(plain) / sizeof(plain[0]); i++) {
        c = base("psk");
        c.transport = plain[i];
        char what[64];
        snprintf(what, sizeof(what), "transport %s + security", plain[i]);
        lite_ctx_t *ctx = NULL;
        int rc = lite_init(&c, &ctx);
        const char *d = lite_init_error();
        /* A backend not compiled in says so; one compiled in must say it cannot encrypt. */
        bool absent = strstr(d, "not compiled") != NULL;
        bool ok = rc == -LITE_ERR_NO_TRANSPORT && (absent || strstr(d, "cannot"));
        printf("%-28s rc=%d %s: %s\n", what, rc, ok ? "ok" : "WRONG", d);
        failures += !ok;
        lite_finalize(ctx);
    }
    printf("%s\n", failures ? "FAILED" : "all refused as expected");
    return failures ? 1 : 0;
}
