/* commlens-wire: one emulated link of a virtual node, a process between the node's TAP device (its
 * eth0) and the veth that plugs it into the switch (commlens.launch.wire starts it in the node).
 *
 * Each direction serialises every frame as a wire does: from the node, a frame leaves at the later of
 * its arrival and the previous frame's departure, plus its length over the rate, then waits the link's
 * delay; a lost frame (the loss probability) never leaves. The first frame after a pause waits its own
 * time too, which a token bucket (tbf) would let through at once. Towards the node the switch forwards
 * cut-through, as HPC switches do: a frame starts down the node's link as its first bit arrives, so on an
 * idle link it adds no second serialisation, while frames from several senders queue for the link. The
 * two directions are independent, as on a full-duplex link. Frames pass with their segmentation offload
 * (a virtio-net header on both sides): a TCP burst of n segments is one frame of n segments' wire bytes
 * (each segment's headers counted), which leaves when its last segment would have; what a message's
 * last byte waits is the same, at a fraction of the work per byte. Bursts are kept short (the node's
 * eth0 takes at most commlens.launch.wire.BURST_S of the link's time a frame, one segment at low
 * rates), since the receiver acknowledges a frame only once it is whole. Its starter gives the process
 * a real-time priority where the host allows one (commlens.launch.vnodes.lifecycle), so that ranks
 * busy-polling on the same cores delay a frame by the time to wake it, not by a scheduler's time slice.
 *
 * A planted path fault (PATH arguments) gives the frames this node sends to one other node's IPv4 address
 * their own rate, delay and loss in place of the link's: the other node's wire does the same the other way.
 *
 *   commlens-wire TAP DEVICE RATE_BITS_PER_S [DELAY_S [LOSS_PERCENT [SEED [PATH...]]]]
 *   PATH: IPV4=RATE_BITS_PER_S:DELAY_S:LOSS_PERCENT
 *
 * It prints "ready" once TAP exists, and ends with its parent (the process that made the cluster). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if_packet.h>
#include <linux/if_tun.h>
#include <linux/virtio_net.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_FRAME 65600    /* the largest frame with segmentation offload */
#define VNET sizeof(struct virtio_net_hdr)   /* what precedes every frame on both sides */
/* A frame due sooner than this is waited for awake: a sleeping process wakes tens of microseconds late
 * on a virtual machine, which would add to every frame's time. */
#define SPIN_NS 40000
#define QUEUE 10000        /* frames waiting per direction, as netem's limit: more are dropped */

struct frame {
    int64_t due_ns;
    int len;
    unsigned char *data;
};

struct direction {
    struct frame queue[QUEUE];
    int head, tail;
    int64_t free_at_ns;    /* when the wire is free again */
    int out;               /* where frames go */
    int cut_through;       /* frames arrive already serialised, at the same rate, from another link */
};

/* How frames are carried: the link's way, or a planted path's to one peer (to_switch only). */
struct carriage {
    double ns_per_byte, delay_ns, loss;
};

#define MAX_PATHS 64
struct path {
    struct in_addr peer;
    struct carriage carriage;
};

static struct carriage own_link;
static struct path paths[MAX_PATHS];
static int path_count;
static struct direction to_switch, to_node;

static int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Bytes on the wire of a frame (its virtio-net header first): with segmentation offload, every segment
 * carries the headers of the first (Ethernet, IP and TCP or UDP). */
static long wire_bytes(const unsigned char *bytes, int len)
{
    const struct virtio_net_hdr *vnet = (const void *)bytes;
    const unsigned char *frame = bytes + VNET;
    long payload_bytes = len - (long)VNET;
    if (vnet->gso_type == VIRTIO_NET_HDR_GSO_NONE || !vnet->gso_size || payload_bytes < 14 + 20) return payload_bytes;
    long headers = 14;
    int version = frame[14] >> 4;
    headers += version == 4 ? (frame[14] & 15) * 4 : 40;
    int protocol = version == 4 ? frame[14 + 9] : frame[14 + 6];
    if (protocol == IPPROTO_TCP && payload_bytes > headers + 12) headers += (frame[headers + 12] >> 4) * 4;
    else headers += 8;
    long data = payload_bytes - headers, segments = (data + vnet->gso_size - 1) / vnet->gso_size;
    return payload_bytes + (segments > 1 ? segments - 1 : 0) * headers;
}

/* The carriage of a frame this node sends: a planted path's where it goes to that path's peer. */
static const struct carriage *carriage_of(const unsigned char *bytes, int len)
{
    const unsigned char *frame = bytes + VNET;
    if (path_count == 0 || len < (int)VNET + 14 + 20 || frame[12] != 0x08 || frame[13] != 0x00) return &own_link;
    for (int i = 0; i < path_count; i++)
        if (memcmp(frame + 14 + 16, &paths[i].peer, 4) == 0) return &paths[i].carriage;
    return &own_link;
}

static void take(struct direction *d, const unsigned char *bytes, int len)
{
    int next = (d->tail + 1) % QUEUE;
    if (next == d->head || len <= (int)VNET) return;   /* the queue is full: dropped */
    /* A planted path is what the node sends its peer: frames to the node keep the link's carriage. */
    const struct carriage *c = d == &to_switch ? carriage_of(bytes, len) : &own_link;
    int64_t now = now_ns(), wire_ns = (int64_t)(wire_bytes(bytes, len) * c->ns_per_byte);
    int64_t arrived = d->cut_through ? now - wire_ns : now;   /* cut-through: when its first bit came */
    int64_t start = d->free_at_ns > arrived ? d->free_at_ns : arrived;
    d->free_at_ns = start + wire_ns;
    if (c->loss > 0 && drand48() * 100 < c->loss) return;   /* it took the wire's time, and was lost */
    unsigned char *copy = malloc((size_t)len);
    if (!copy) return;
    memcpy(copy, bytes, (size_t)len);
    d->queue[d->tail] = (struct frame){.due_ns = d->free_at_ns + (int64_t)c->delay_ns, .len = len, .data = copy};
    d->tail = next;
}

/* IPV4=RATE_BITS_PER_S:DELAY_S:LOSS_PERCENT; 0 when it is not one. */
static int parse_path(const char *text, struct path *path)
{
    char address[INET_ADDRSTRLEN] = {0};
    double rate, delay_s, loss_percent;
    const char *equals = strchr(text, '=');
    if (!equals || equals - text >= (long)sizeof address) return 0;
    memcpy(address, text, (size_t)(equals - text));
    if (inet_pton(AF_INET, address, &path->peer) != 1) return 0;
    if (sscanf(equals + 1, "%lf:%lf:%lf", &rate, &delay_s, &loss_percent) != 3 || !(rate > 0)) return 0;
    path->carriage = (struct carriage){8e9 / rate, delay_s * 1e9, loss_percent};
    return 1;
}

static void put(int out, const unsigned char *bytes, size_t len)
{
    if (write(out, bytes, len) < 0 && errno != EAGAIN && errno != ENOBUFS) perror("commlens-wire");
}

static void send_due(struct direction *d, int64_t now)
{
    while (d->head != d->tail && d->queue[d->head].due_ns <= now) {
        struct frame *f = &d->queue[d->head];
        put(d->out, f->data, (size_t)f->len);
        free(f->data);
        d->head = (d->head + 1) % QUEUE;
    }
}

static int64_t next_due(void)
{
    int64_t next = -1;
    if (to_switch.head != to_switch.tail) next = to_switch.queue[to_switch.head].due_ns;
    if (to_node.head != to_node.tail && (next < 0 || to_node.queue[to_node.head].due_ns < next))
        next = to_node.queue[to_node.head].due_ns;
    return next;
}

static int open_tap(const char *name)
{
    int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK);
    struct ifreq request = {0};
    request.ifr_flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR;
    strncpy(request.ifr_name, name, IFNAMSIZ - 1);
    int header = (int)VNET;
    if (fd < 0 || ioctl(fd, TUNSETIFF, &request) < 0 || ioctl(fd, TUNSETVNETHDRSZ, &header) < 0 ||
        ioctl(fd, TUNSETOFFLOAD, TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6) < 0)
        return -1;
    return fd;
}

static int open_device(const char *name)
{
    int fd = socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL));
    struct sockaddr_ll address = {.sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_ALL),
                                  .sll_ifindex = (int)if_nametoindex(name)};
    int one = 1, buffer = 8 << 20;
    if (fd < 0 || !address.sll_ifindex || bind(fd, (struct sockaddr *)&address, sizeof address) < 0) return -1;
    setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof one);   /* not what it sends itself */
    if (setsockopt(fd, SOL_PACKET, PACKET_VNET_HDR, &one, sizeof one) < 0) return -1;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buffer, sizeof buffer);
    return fd;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: commlens-wire TAP DEVICE RATE_BITS_PER_S [DELAY_S [LOSS_PERCENT [SEED [PATH...]]]]\n");
        return 2;
    }
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    own_link.ns_per_byte = 8e9 / atof(argv[3]);
    own_link.delay_ns = argc > 4 ? atof(argv[4]) * 1e9 : 0;
    own_link.loss = argc > 5 ? atof(argv[5]) : 0;
    srand48(argc > 6 ? atol(argv[6]) : 1);
    for (int i = 7; i < argc; i++)
        if (path_count == MAX_PATHS || !parse_path(argv[i], &paths[path_count++])) {
            fprintf(stderr, "commlens-wire: %s: not a path (IPV4=RATE_BITS_PER_S:DELAY_S:LOSS_PERCENT, at most %d)\n",
                    argv[i], MAX_PATHS);
            return 2;
        }
    int tap = open_tap(argv[1]), device = open_device(argv[2]);
    if (tap < 0 || device < 0 || !(own_link.ns_per_byte > 0)) {
        fprintf(stderr, "commlens-wire: %s: %s\n", tap < 0 ? argv[1] : device < 0 ? argv[2] : argv[3],
                tap < 0 || device < 0 ? strerror(errno) : "not a rate");
        return 1;
    }
    to_switch.out = device;
    to_node.out = tap;
    to_node.cut_through = 1;
    printf("ready\n");
    fflush(stdout);
    static unsigned char bytes[MAX_FRAME];
    for (;;) {
        struct pollfd readable[2] = {{.fd = tap, .events = POLLIN}, {.fd = device, .events = POLLIN}};
        int64_t next = next_due();
        struct timespec wait = {0, 0};
        if (next >= 0) {
            int64_t ns = next - SPIN_NS - now_ns();
            wait = (struct timespec){ns > 0 ? ns / 1000000000 : 0, ns > 0 ? ns % 1000000000 : 0};
        }
        if (ppoll(readable, 2, next >= 0 ? &wait : NULL, NULL) > 0) {
            if ((readable[0].revents | readable[1].revents) & (POLLERR | POLLHUP | POLLNVAL)) return 0;
            /* Everything waiting, before sleeping again: one wake-up per burst, not per frame. */
            ssize_t len;
            while ((len = read(tap, bytes, sizeof bytes)) > 0) take(&to_switch, bytes, (int)len);
            while ((len = recv(device, bytes, sizeof bytes, MSG_DONTWAIT)) > 0) take(&to_node, bytes, (int)len);
        }
        next = next_due();
        int64_t now = now_ns();
        while (next >= 0 && now < next && next - now <= SPIN_NS) now = now_ns();
        send_due(&to_switch, now);
        send_due(&to_node, now);
    }
}
