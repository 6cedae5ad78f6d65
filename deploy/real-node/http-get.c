/* http-get IP:PORT PATH: one plain HTTP/1.0 GET, the response body on stdout, exit 0 on a 2xx status.
 * The real node's test pods use it to scrape a Service from inside the cluster (the image has no shell and
 * no curl: nothing can be pulled here). Numeric IPv4 addresses only, so the static binary needs no resolver. */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: http-get IP:PORT /PATH\n");
    return 2;
  }
  char host[64];
  const char *colon = strrchr(argv[1], ':');
  if (colon == NULL || (size_t)(colon - argv[1]) >= sizeof host) {
    fprintf(stderr, "http-get: expected IP:PORT, got %s\n", argv[1]);
    return 2;
  }
  memcpy(host, argv[1], (size_t)(colon - argv[1]));
  host[colon - argv[1]] = '\0';
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((unsigned short)atoi(colon + 1))};
  if (inet_pton(AF_INET, host, &addr.sin_addr) != 1) {
    fprintf(stderr, "http-get: not an IPv4 address: %s\n", host);
    return 2;
  }
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
    perror("http-get: connect");
    return 1;
  }
  char request[1024];
  int n = snprintf(request, sizeof request, "GET %s HTTP/1.0\r\nHost: %s\r\n\r\n", argv[2], argv[1]);
  if (n < 0 || (size_t)n >= sizeof request || write(fd, request, (size_t)n) != n) {
    perror("http-get: write");
    return 1;
  }
  /* Read the whole response, then split the status line and headers from the body. */
  size_t cap = 1 << 16, len = 0;
  char *buf = malloc(cap + 1);
  ssize_t got;
  while (buf != NULL && (got = read(fd, buf + len, cap - len)) > 0) {
    len += (size_t)got;
    if (len == cap) {
      cap *= 2;
      buf = realloc(buf, cap + 1);
    }
  }
  if (buf == NULL) return 1;
  buf[len] = '\0';
  int status = 0;
  if (sscanf(buf, "HTTP/%*s %d", &status) != 1) {
    fprintf(stderr, "http-get: not an HTTP response\n");
    return 1;
  }
  char *body = strstr(buf, "\r\n\r\n");
  fputs(body != NULL ? body + 4 : "", stdout);
  fprintf(stderr, "http-get: %s%s -> %d\n", argv[1], argv[2], status);
  return status >= 200 && status < 300 ? 0 : 1;
}
