/* Built static by the xlane run tests: sends COUNT UDP datagrams of 100 B
 * to ADDR:PORT from an unmarked socket, then prints "sent COUNT".
 * Usage: sender ADDR PORT COUNT */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc != 4) return 2;
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons(atoi(argv[2]));
    if (inet_pton(AF_INET, argv[1], &a.sin_addr) != 1) return 2;
    int n = atoi(argv[3]);
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    if (fd < 0) { perror("socket"); return 1; }
    char buf[100];
    memset(buf, 'x', sizeof buf);
    int sent = 0;
    for (int i = 0; i < n; i++) {
        if (sendto(fd, buf, sizeof buf, 0, (struct sockaddr *)&a, sizeof a) == sizeof buf) sent++;
        usleep(1000);
    }
    printf("sent %d\n", sent);
    return 0;
}
