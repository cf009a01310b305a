/* A program run under the xlane preload library by its tests.
 * Usage: probe PORT FAMILY(4|6)
 * Listens on loopback PORT, connects to itself, takes the connection
 * with accept4, then tries to leave the level: sets SO_PRIORITY 0 and
 * the TOS / traffic class 0 on both ends. Then makes a setsockopt call
 * the kernel refuses (length 0). Prints what it reads back with
 * getsockopt, one "name tos prio" line per socket, and "refused rc errno",
 * then, for a UDP client that only calls sendto, "udpclient tos prio",
 * then "done". */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int v6;

static void show(const char *name, int fd) {
    int tos = -1, prio = -1;
    socklen_t l = sizeof(int);
    if (v6)
        getsockopt(fd, IPPROTO_IPV6, IPV6_TCLASS, &tos, &l);
    else
        getsockopt(fd, IPPROTO_IP, IP_TOS, &tos, &l);
    l = sizeof(int);
    getsockopt(fd, SOL_SOCKET, SO_PRIORITY, &prio, &l);
    printf("%s %d %d\n", name, tos, prio);
}

static void leave_level(int fd) {
    int zero = 0;
    setsockopt(fd, SOL_SOCKET, SO_PRIORITY, &zero, sizeof zero);
    if (v6)
        setsockopt(fd, IPPROTO_IPV6, IPV6_TCLASS, &zero, sizeof zero);
    else
        setsockopt(fd, IPPROTO_IP, IP_TOS, &zero, sizeof zero);
}

int main(int argc, char **argv) {
    if (argc != 3) return 2;
    int port = atoi(argv[1]);
    v6 = strcmp(argv[2], "6") == 0;
    struct sockaddr_storage ss;
    socklen_t sl;
    memset(&ss, 0, sizeof ss);
    if (v6) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        a->sin6_family = AF_INET6;
        a->sin6_port = htons(port);
        a->sin6_addr = in6addr_loopback;
        sl = sizeof *a;
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        a->sin_family = AF_INET;
        a->sin_port = htons(port);
        a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        sl = sizeof *a;
    }
    int fam = v6 ? AF_INET6 : AF_INET;
    int l = socket(fam, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (l < 0 || bind(l, (struct sockaddr *)&ss, sl) || listen(l, 4)) {
        perror("listen");
        return 1;
    }
    int c = socket(fam, SOCK_STREAM, 0);
    if (c < 0 || connect(c, (struct sockaddr *)&ss, sl)) {
        perror("connect");
        return 1;
    }
    int a = accept4(l, NULL, NULL, SOCK_CLOEXEC);
    if (a < 0) {
        perror("accept4");
        return 1;
    }
    leave_level(a);
    leave_level(c);
    show("accepted", a);
    show("client", c);
    int v = 0;
    errno = 0;
    int rc = setsockopt(a, SOL_SOCKET, SO_PRIORITY, &v, 0);
    printf("refused %d %d\n", rc, errno);
    show("after", a);
    /* A UDP client that never connects or binds: sendto a datagram to
     * the same port number (UDP's own port space) on a bound socket. */
    int us = socket(fam, SOCK_DGRAM, 0);
    if (us < 0 || bind(us, (struct sockaddr *)&ss, sl)) {
        perror("udp bind");
        return 1;
    }
    int uc = socket(fam, SOCK_DGRAM, 0);
    char m = 'x';
    if (uc < 0 || sendto(uc, &m, 1, 0, (struct sockaddr *)&ss, sl) != 1) {
        perror("sendto");
        return 1;
    }
    show("udpclient", uc);
    printf("done\n");
    return 0;
}
