/*
 * virtio.h: what the virtio 1.2 specification fixes, shared by the ring,
 * the transport, the net driver and the host-side simulated device. Layouts
 * only, no code. All fields are little-endian; x86-64 is too, so they are
 * plain integers here.
 */
#ifndef VNETLAB_VIRTIO_H
#define VNETLAB_VIRTIO_H

#include <stdint.h>

/* 2.1 Device Status Field */
#define VIRTIO_STATUS_ACKNOWLEDGE        1
#define VIRTIO_STATUS_DRIVER             2
#define VIRTIO_STATUS_DRIVER_OK          4
#define VIRTIO_STATUS_FEATURES_OK        8
#define VIRTIO_STATUS_DEVICE_NEEDS_RESET 64
#define VIRTIO_STATUS_FAILED             128

/* 6 Reserved Feature Bits (device-independent) */
#define VIRTIO_F_INDIRECT_DESC     28
#define VIRTIO_F_EVENT_IDX         29
#define VIRTIO_F_VERSION_1         32
#define VIRTIO_F_ACCESS_PLATFORM   33
#define VIRTIO_F_RING_PACKED       34
#define VIRTIO_F_ORDER_PLATFORM    36
#define VIRTIO_F_NOTIFICATION_DATA 38

/* 5.1.3 Network device feature bits */
#define VIRTIO_NET_F_CSUM       0
#define VIRTIO_NET_F_GUEST_CSUM 1
#define VIRTIO_NET_F_MTU        3
#define VIRTIO_NET_F_MAC        5
#define VIRTIO_NET_F_GUEST_TSO4 7
#define VIRTIO_NET_F_GUEST_TSO6 8
#define VIRTIO_NET_F_GUEST_ECN  9
#define VIRTIO_NET_F_GUEST_UFO  10
#define VIRTIO_NET_F_HOST_TSO4  11
#define VIRTIO_NET_F_HOST_TSO6  12
#define VIRTIO_NET_F_HOST_ECN   13
#define VIRTIO_NET_F_HOST_UFO   14
#define VIRTIO_NET_F_MRG_RXBUF  15
#define VIRTIO_NET_F_STATUS     16
#define VIRTIO_NET_F_CTRL_VQ    17
#define VIRTIO_NET_F_MQ         22
#define VIRTIO_NET_F_RSS        60

#define VIRTIO_BIT(f) (1ull << (f))

/* 5.1.4 Network device configuration layout (offsets in device config) */
#define VIRTIO_NET_CFG_MAC            0
#define VIRTIO_NET_CFG_STATUS         6
#define VIRTIO_NET_CFG_MAX_VQ_PAIRS   8 /* le16, with VIRTIO_NET_F_MQ */
#define VIRTIO_NET_CFG_MTU            10
#define VIRTIO_NET_CFG_RSS_MAX_KEY    17 /* u8, with VIRTIO_NET_F_RSS */
#define VIRTIO_NET_CFG_RSS_MAX_TABLE  18 /* le16 */
#define VIRTIO_NET_CFG_RSS_HASH_TYPES 20 /* le32 */

/* 5.1.6.5 control virtqueue: class, command, data, then the ack the
 * device writes; 5.1.6.5.5 the multiqueue class. */
#define VIRTIO_NET_OK                   0
#define VIRTIO_NET_ERR                  1
#define VIRTIO_NET_CTRL_MQ              4
#define VIRTIO_NET_CTRL_MQ_VQ_PAIRS_SET 0
#define VIRTIO_NET_CTRL_MQ_VQ_PAIRS_MIN 1
#define VIRTIO_NET_CTRL_MQ_VQ_PAIRS_MAX 0x8000
#define VIRTIO_NET_CTRL_MQ_RSS_CONFIG   1 /* 5.1.6.5.7.1 */
/* 5.1.6.4.3.1.1 hash types */
#define VIRTIO_NET_RSS_HASH_TYPE_IPv4  (1u << 0)
#define VIRTIO_NET_RSS_HASH_TYPE_TCPv4 (1u << 1)
#define VIRTIO_NET_RSS_HASH_TYPE_UDPv4 (1u << 2)
#define VIRTIO_NET_S_LINK_UP           1

/* 5.1.6 struct virtio_net_hdr; with VERSION_1 num_buffers is always there,
 * so the header is 12 bytes whether or not MRG_RXBUF is negotiated. */
struct virtio_net_hdr {
	uint8_t flags;
	uint8_t gso_type;
	uint16_t hdr_len;
	uint16_t gso_size;
	uint16_t csum_start;
	uint16_t csum_offset;
	uint16_t num_buffers;
};
#define VIRTIO_NET_HDR_F_NEEDS_CSUM 1
#define VIRTIO_NET_HDR_F_DATA_VALID 2
#define VIRTIO_NET_HDR_F_RSC_INFO   4
#define VIRTIO_NET_HDR_GSO_NONE     0
#define VIRTIO_NET_HDR_GSO_TCPV4    1
#define VIRTIO_NET_HDR_GSO_UDP      3
#define VIRTIO_NET_HDR_GSO_TCPV6    4
#define VIRTIO_NET_HDR_GSO_ECN      0x80

/* 2.7.5 The Virtqueue Descriptor Table */
struct virtq_desc {
	uint64_t addr;
	uint32_t len;
	uint16_t flags;
	uint16_t next;
};
#define VIRTQ_DESC_F_NEXT  1
#define VIRTQ_DESC_F_WRITE 2

/* 2.7.6 The Virtqueue Available Ring; used_event follows ring[size]. */
struct virtq_avail {
	uint16_t flags;
	uint16_t idx;
	uint16_t ring[];
};
#define VIRTQ_AVAIL_F_NO_INTERRUPT 1

/* 2.7.8 The Virtqueue Used Ring; avail_event follows ring[size]. */
struct virtq_used_elem {
	uint32_t id;
	uint32_t len;
};
struct virtq_used {
	uint16_t flags;
	uint16_t idx;
	struct virtq_used_elem ring[];
};
#define VIRTQ_USED_F_NO_NOTIFY 1

/* 2.8.13 Packed Virtqueue Descriptor Format: one ring of these, written by
 * both sides (the driver makes descriptors available, the device
 * overwrites them with used ones). */
struct virtq_pdesc {
	uint64_t addr;
	uint32_t len;
	uint16_t id; /* Buffer ID (2.8.6: the device reads it from the last descriptor) */
	uint16_t flags;
};
/* 2.8.1: available when AVAIL != USED, used when AVAIL == USED, each
 * compared with the side's ring wrap counter. */
#define VIRTQ_DESC_F_AVAIL (1u << 7)
#define VIRTQ_DESC_F_USED  (1u << 15)

/* 2.8.14 Event Suppression Structure Format: Driver Area (driver-written,
 * used buffer notifications) and Device Area (device-written, available
 * buffer notifications) are one of these each. */
struct virtq_event {
	uint16_t off_wrap; /* desc_event_off (bits 0-14), desc_event_wrap (bit 15) */
	uint16_t flags;    /* desc_event_flags (bits 0-1) */
};
#define VIRTQ_EVENT_F_ENABLE  0 /* 2.8.10: RING_EVENT_FLAGS_ENABLE */
#define VIRTQ_EVENT_F_DISABLE 1 /* RING_EVENT_FLAGS_DISABLE */
#define VIRTQ_EVENT_F_DESC    2 /* RING_EVENT_FLAGS_DESC: only with VIRTIO_F_EVENT_IDX */
#define VIRTQ_EVENT_WRAP      (1u << 15)

/* 2.7 Split Virtqueues: queue size is a power of two, at most 32768. */
#define VIRTQ_SIZE_LIMIT 32768

/* 4.1.4 Virtio Structure PCI Capabilities */
#define VIRTIO_PCI_CAP_COMMON_CFG 1
#define VIRTIO_PCI_CAP_NOTIFY_CFG 2
#define VIRTIO_PCI_CAP_ISR_CFG    3
#define VIRTIO_PCI_CAP_DEVICE_CFG 4
#define VIRTIO_PCI_CAP_PCI_CFG    5

/* struct virtio_pci_cap field offsets within the PCI capability */
#define VIRTIO_PCI_CAP_LEN         2
#define VIRTIO_PCI_CAP_CFG_TYPE    3
#define VIRTIO_PCI_CAP_BAR         4
#define VIRTIO_PCI_CAP_OFFSET      8
#define VIRTIO_PCI_CAP_LENGTH      12
#define VIRTIO_PCI_NOTIFY_CAP_MULT 16 /* struct virtio_pci_notify_cap */

/* 4.1.4.3 struct virtio_pci_common_cfg field offsets */
#define VIRTIO_PCI_COMMON_DFSELECT      0
#define VIRTIO_PCI_COMMON_DF            4
#define VIRTIO_PCI_COMMON_GFSELECT      8
#define VIRTIO_PCI_COMMON_GF            12
#define VIRTIO_PCI_COMMON_MSIX          16
#define VIRTIO_PCI_COMMON_NUMQ          18
#define VIRTIO_PCI_COMMON_STATUS        20
#define VIRTIO_PCI_COMMON_CFGGENERATION 21
#define VIRTIO_PCI_COMMON_Q_SELECT      22
#define VIRTIO_PCI_COMMON_Q_SIZE        24
#define VIRTIO_PCI_COMMON_Q_MSIX        26
#define VIRTIO_PCI_COMMON_Q_ENABLE      28
#define VIRTIO_PCI_COMMON_Q_NOFF        30
#define VIRTIO_PCI_COMMON_Q_DESCLO      32
#define VIRTIO_PCI_COMMON_Q_AVAILLO     40
#define VIRTIO_PCI_COMMON_Q_USEDLO      48
#define VIRTIO_PCI_COMMON_LEN           56 /* what we touch; 1.2 adds fields after */

/* 4.1.2 PCI Device Discovery */
#define VIRTIO_PCI_VENDOR           0x1af4
#define VIRTIO_PCI_MODERN_BASE      0x1040 /* modern id = 0x1040 + virtio device id */
#define VIRTIO_PCI_TRANSITIONAL_NET 0x1000
#define VIRTIO_ID_NET               1

#endif
