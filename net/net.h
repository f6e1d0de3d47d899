/*
 * net.h: the network layer (lwIP on the virtio-net driver) as the apps see
 * it, grouped by owning file. Apps use lwIP's raw API for sockets-like work
 * and these calls for bring-up, the main loop and counters.
 */
#ifndef VNETLAB_NET_H
#define VNETLAB_NET_H

#include <stdbool.h>
#include <stdint.h>
#include "lwip/ip_addr.h"
#include "lwip/netif.h"

/* net.c: configuration, bring-up and the NO_SYS main loop */
void net_configure(void); /* claims ip=, gw= (before cmdline_finish) */
/* Open the NIC, add the netif, configure IPv4 (static or DHCP, bounded
 * wait). Prints "net ip=... gw=... mac=..." or an ERROR line and exits. */
void net_up(void);
struct netif *net_netif(void);
struct vnet *net_vnet(void);   /* the driver under the netif, for counter snapshots */
const char *net_backend(void); /* backend= label from the host, for RESULT lines */
/* One pass of the loop: poll the device, feed lwIP, run its timers. */
void net_poll(void);
/* End of a pass: the burst point for kick batching. */
void net_end_pass(void);
/* Run passes until done(arg) is true (0), the timeout passes (-1), or the
 * device fails (-2: ERROR line already printed by the caller's choice). */
int net_run(bool (*done)(void *), void *arg, uint64_t timeout_ns, void (*tick)(void *));
/* Flush every pending kick (the end of a run counts as a wait). */
void net_drain(void);
void net_print_counters(void); /* driver COUNTERS lines + LWIPSTATS line */
uint64_t net_lwip_drops(void); /* frames/segments lwIP dropped (all layers) */

/* netif.c: the lwIP netif on the driver (zero-copy RX, burst TX) */
struct vnet;
err_t vnetif_init(struct netif *netif);     /* netif_add() init callback; state = struct vnet * */
void vnetif_input_all(struct netif *netif); /* hand every received frame to lwIP */
uint64_t vnetif_tx_drops(void);             /* frames dropped after bounded back-pressure */

#endif
