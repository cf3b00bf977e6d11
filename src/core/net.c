/* Listening sockets for millrace's HTTP servers (serve, ui): the host
 * parsed as an IPv4 or IPv6 literal, bound and listened on here rather
 * than in libmicrohttpd, whose bind failure names neither the address nor
 * the port. The options are libmicrohttpd's defaults: SO_REUSEADDR (a
 * restart need not wait out TIME_WAIT), IPV6_V6ONLY (:: is IPv6 only), a
 * SOMAXCONN backlog. */
#define _GNU_SOURCE
#include "millrace/core.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

mr_status mr_net_listen(const char *host, int port, int *fd_out, int *v6_out, char *shown, size_t shown_len,
                        mr_error *err)
{
    *fd_out = -1;
    if (v6_out) *v6_out = 0;
    if (port < 0 || port > 65535) return MR_ERR(err, MR_E_INVALID_ARG, "--port %d out of range", port);
    struct sockaddr_in addr4;
    struct sockaddr_in6 addr6;
    memset(&addr4, 0, sizeof(addr4));
    memset(&addr6, 0, sizeof(addr6));
    if (!host) host = "127.0.0.1";
    if (!strcmp(host, "localhost")) host = "127.0.0.1";
    int v6 = 0;
    if (inet_pton(AF_INET, host, &addr4.sin_addr) == 1) {
        addr4.sin_family = AF_INET;
        addr4.sin_port = htons((uint16_t)port);
    } else {
        /* an IPv6 literal, bare or in brackets ("::1", "[::1]") */
        char h6[INET6_ADDRSTRLEN + 2];
        size_t hl = strlen(host);
        if (hl >= 2 && host[0] == '[' && host[hl - 1] == ']' && hl - 2 < sizeof(h6)) {
            memcpy(h6, host + 1, hl - 2);
            h6[hl - 2] = '\0';
        } else {
            snprintf(h6, sizeof(h6), "%s", hl < sizeof(h6) ? host : "");
        }
        if (inet_pton(AF_INET6, h6, &addr6.sin6_addr) != 1)
            return MR_ERR(err, MR_E_INVALID_ARG, "--host '%s' is not an IPv4 or IPv6 address", host);
        addr6.sin6_family = AF_INET6;
        addr6.sin6_port = htons((uint16_t)port);
        v6 = 1;
    }
    char addr_txt[INET6_ADDRSTRLEN] = "", sh[INET6_ADDRSTRLEN + 2];
    if (v6) inet_ntop(AF_INET6, &addr6.sin6_addr, addr_txt, sizeof(addr_txt));
    else inet_ntop(AF_INET, &addr4.sin_addr, addr_txt, sizeof(addr_txt));
    snprintf(sh, sizeof(sh), v6 ? "[%s]" : "%s", addr_txt);
    if (shown) snprintf(shown, shown_len, "%s", sh);
    const struct sockaddr *addr = v6 ? (const struct sockaddr *)&addr6 : (const struct sockaddr *)&addr4;
    socklen_t addr_len = v6 ? sizeof(addr6) : sizeof(addr4);
    int fd = socket(addr->sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return MR_ERR_SYS(err, MR_E_IO, errno, "cannot listen on %s:%d: cannot create a socket", sh, port);
    int on = 1;
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
    if (v6) (void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof(on));
    if (bind(fd, addr, addr_len) != 0 || listen(fd, SOMAXCONN) != 0) {
        int e = errno;
        close(fd);
        if (e == EADDRINUSE) {
            MR_ERR(err, MR_E_IO, "cannot listen on %s:%d: port %d is already in use", sh, port, port);
            mr_error_hint(err,
                          "another process listens on %s:%d; stop it, or give --port another number (0 picks a free one)",
                          sh, port);
            return MR_E_IO;
        }
        if (e == EADDRNOTAVAIL) {
            MR_ERR(err, MR_E_IO, "cannot listen on %s:%d: no interface of this machine has the address %s", sh, port,
                   sh);
            return MR_E_IO;
        }
        return MR_ERR_SYS(err, MR_E_IO, e, "cannot listen on %s:%d", sh, port);
    }
    *fd_out = fd;
    if (v6_out) *v6_out = v6;
    return MR_OK;
}
