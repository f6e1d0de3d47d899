/*
 * test_vnet.h: what test_vnet.c shares with the test files linked into the
 * same per-variant binary (test_vnet_fwd.c).
 */
#ifndef VNETLAB_TEST_VNET_H
#define VNETLAB_TEST_VNET_H

#include "tests/unit/sim_dev.h"

struct vnet *dev_open(enum sim_mode mode); /* a fresh simulated device and driver */
unsigned test_vnet_done_total(void);       /* tx_done calls since dev_open() */
void test_vnet_fwd(void);                  /* test_vnet_fwd.c: vnet_tx_forward() */

#endif
