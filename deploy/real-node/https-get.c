/* https-get IP:PORT PATH [TOKEN_FILE]: one HTTPS GET, presenting the bearer token read from TOKEN_FILE
 * when given (a pod's service account token). Prints "HTTP <status>" on the first line of stdout, then
 * the body; exits 0 on any HTTP answer (the caller judges the status), 1 when there was none. The real
 * node's test pods use it to ask mini-kcm's secure port who may read what. The server's certificate is
 * not verified (mini-kcm's is self-signed, as kube-controller-manager's); the token authenticates.
 * Numeric IPv4 addresses only, so the static binary needs no resolver. */
#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int fail(const char *what) {
  fprintf(stderr, "https-get: %s\n", what);
  ERR_print_errors_fp(stderr);
  return 1;
}

int main(int argc, char **argv) {
  if (argc != 3 && argc != 4) {
    fprintf(stderr, "usage: https-get IP:PORT /PATH [TOKEN_FILE]\n");
    return 2;
  }
  char host[64];
  const char *colon = strrchr(argv[1], ':');
  if (colon == NULL || (size_t)(colon - argv[1]) >= sizeof host) return fail("expected IP:PORT");
  memcpy(host, argv[1], (size_t)(colon - argv[1]));
  host[colon - argv[1]] = '\0';
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((unsigned short)atoi(colon + 1))};
  if (inet_pton(AF_INET, host, &addr.sin_addr) != 1) return fail("not an IPv4 address");

  char token[4096] = "";
  if (argc == 4) {
    FILE *f = fopen(argv[3], "r");
    if (f == NULL) return fail("cannot open the token file");
    size_t n = fread(token, 1, sizeof token - 1, f);
    fclose(f);
    token[n] = '\0';
    token[strcspn(token, "\r\n")] = '\0';
  }

  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0) return fail("connect failed");
  SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
  if (ctx == NULL) return fail("no TLS context");
  SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
  SSL *ssl = SSL_new(ctx);
  if (ssl == NULL || SSL_set_fd(ssl, fd) != 1 || SSL_connect(ssl) != 1) return fail("TLS handshake failed");

  char request[8192];
  int n = snprintf(request, sizeof request, "GET %s HTTP/1.0\r\nHost: %s\r\n%s%s%s\r\n", argv[2], argv[1],
                   token[0] ? "Authorization: Bearer " : "", token, token[0] ? "\r\n" : "");
  if (n < 0 || (size_t)n >= sizeof request || SSL_write(ssl, request, n) != n) return fail("write failed");

  /* Read the whole response (the server closes after an HTTP/1.0 answer). */
  size_t cap = 1 << 16, len = 0;
  char *buf = malloc(cap + 1);
  int got;
  while (buf != NULL && (got = SSL_read(ssl, buf + len, (int)(cap - len))) > 0) {
    len += (size_t)got;
    if (len == cap) {
      cap *= 2;
      buf = realloc(buf, cap + 1);
    }
  }
  if (buf == NULL) return fail("out of memory");
  buf[len] = '\0';
  int status = 0;
  if (sscanf(buf, "HTTP/%*s %d", &status) != 1) return fail("not an HTTP response");
  char *body = strstr(buf, "\r\n\r\n");
  printf("HTTP %d\n%s", status, body != NULL ? body + 4 : "");
  fprintf(stderr, "https-get: %s%s%s -> %d\n", argv[1], argv[2], token[0] ? " (with a token)" : "", status);
  return 0;
}
