/* podtool: the one static program of the CRI test's image. It is the pod's
 * pause process, the server and the client that share the pod's network and
 * IPC namespaces, and the probe that ExecSync runs inside a container.
 *
 *   podtool pause                 wait for a signal, exit 0
 *   podtool family                fork a child that waits too, then wait
 *   podtool serve PORT KEY TOKEN  put TOKEN in System V shm KEY, serve TOKEN on 127.0.0.1:PORT
 *   podtool client PORT           connect (retrying), print what came, then pause
 *   podtool shmread KEY           print the shm segment KEY
 *   podtool ns NAME               print readlink /proc/self/ns/NAME
 *   podtool ls DIR                print DIR's entries, one a line
 *   podtool ps                    print every visible process's command line */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static void wait_for_signal(void)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    sigprocmask(SIG_BLOCK, &set, NULL);
    int sig = 0;
    sigwait(&set, &sig);
    exit(0);
}

static struct sockaddr_in loopback(const char *port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((unsigned short)atoi(port))};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return a;
}

static int serve(const char *port, const char *key, const char *token)
{
    int id = shmget((key_t)strtol(key, NULL, 0), 4096, IPC_CREAT | 0600);
    char *p = id >= 0 ? shmat(id, NULL, 0) : (char *)-1;
    if (p == (char *)-1) {
        fprintf(stderr, "podtool: shm %s: %s\n", key, strerror(errno));
        return 1;
    }
    snprintf(p, 4096, "%s", token);
    int s = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    struct sockaddr_in a = loopback(port);
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(s, 8) < 0) {
        fprintf(stderr, "podtool: listen on 127.0.0.1:%s: %s\n", port, strerror(errno));
        return 1;
    }
    printf("serving on 127.0.0.1:%s\n", port);
    fflush(stdout);
    for (;;) {
        int c = accept(s, NULL, NULL);
        if (c < 0)
            continue;
        dprintf(c, "%s\n", token);
        close(c);
    }
}

static int client(const char *port)
{
    struct sockaddr_in a = loopback(port);
    for (int i = 0; i < 600; i++) {
        int s = socket(AF_INET, SOCK_STREAM, 0);
        if (s >= 0 && connect(s, (struct sockaddr *)&a, sizeof(a)) == 0) {
            char buf[256];
            ssize_t n = read(s, buf, sizeof(buf) - 1);
            close(s);
            if (n > 0) {
                buf[n] = '\0';
                printf("got: %s", buf);
                fflush(stdout);
                wait_for_signal();
            }
        } else if (s >= 0) {
            close(s);
        }
        nanosleep(&(struct timespec){0, 100 * 1000 * 1000}, NULL);
    }
    fprintf(stderr, "podtool: nothing served on 127.0.0.1:%s\n", port);
    return 1;
}

static int cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv)
{
    const char *cmd = argc > 1 ? argv[1] : "pause";
    if (strcmp(cmd, "pause") == 0)
        wait_for_signal();
    if (strcmp(cmd, "family") == 0) {
        pid_t c = fork();
        if (c == 0)
            for (;;)
                pause();
        wait_for_signal();
    }
    if (strcmp(cmd, "serve") == 0 && argc == 5)
        return serve(argv[2], argv[3], argv[4]);
    if (strcmp(cmd, "client") == 0 && argc == 3)
        return client(argv[2]);
    if (strcmp(cmd, "shmread") == 0 && argc == 3) {
        int id = shmget((key_t)strtol(argv[2], NULL, 0), 0, 0);
        char *p = id >= 0 ? shmat(id, NULL, SHM_RDONLY) : (char *)-1;
        if (p == (char *)-1) {
            fprintf(stderr, "podtool: shm %s: %s\n", argv[2], strerror(errno));
            return 1;
        }
        printf("%.4095s\n", p);
        return 0;
    }
    if (strcmp(cmd, "ns") == 0 && argc == 3) {
        char path[64], link[128];
        snprintf(path, sizeof(path), "/proc/self/ns/%s", argv[2]);
        ssize_t n = readlink(path, link, sizeof(link) - 1);
        if (n < 0) {
            fprintf(stderr, "podtool: readlink %s: %s\n", path, strerror(errno));
            return 1;
        }
        printf("%.*s\n", (int)n, link);
        return 0;
    }
    if (strcmp(cmd, "ls") == 0 && argc == 3) {
        DIR *d = opendir(argv[2]);
        if (d == NULL) {
            fprintf(stderr, "podtool: opendir %s: %s\n", argv[2], strerror(errno));
            return 1;
        }
        char *names[1024];
        size_t n = 0;
        struct dirent *e;
        while ((e = readdir(d)) != NULL && n < 1024)
            if (e->d_name[0] != '.')
                names[n++] = strdup(e->d_name);
        closedir(d);
        qsort(names, n, sizeof(names[0]), cmp);
        for (size_t i = 0; i < n; i++)
            printf("%s\n", names[i]);
        return 0;
    }
    if (strcmp(cmd, "ps") == 0) {
        DIR *d = opendir("/proc");
        struct dirent *e;
        while (d != NULL && (e = readdir(d)) != NULL) {
            if (e->d_name[0] < '0' || e->d_name[0] > '9')
                continue;
            char path[300], buf[512];
            snprintf(path, sizeof(path), "/proc/%s/cmdline", e->d_name);
            FILE *f = fopen(path, "r");
            if (f == NULL)
                continue;
            size_t n = fread(buf, 1, sizeof(buf) - 1, f);
            fclose(f);
            for (size_t i = 0; i + 1 < n; i++)
                if (buf[i] == '\0')
                    buf[i] = ' ';
            buf[n] = '\0';
            printf("%s %s\n", e->d_name, buf);
        }
        return 0;
    }
    fprintf(stderr, "podtool: unknown command\n");
    return 2;
}
