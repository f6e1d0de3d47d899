/*
 * virtio_dev.c: a virtio device through its transport's ops
 * (virtio_dev.h). Nothing here touches a register or knows a transport.
 */
#include "drivers/virtio/virtio_dev.h"

bool virtio_dev_found(const struct virtio_dev *vd)
{
	return vd->ops != NULL;
}

const char *virtio_dev_transport_name(const struct virtio_dev *vd)
{
	return vd->ops ? vd->ops->name : "none";
}

int virtio_dev_reset(struct virtio_dev *vd)
{
	return vd->ops->reset(vd->t);
}

uint8_t virtio_dev_status(struct virtio_dev *vd)
{
	return vd->ops->status(vd->t);
}

void virtio_dev_add_status(struct virtio_dev *vd, uint8_t bits)
{
	vd->ops->add_status(vd->t, bits);
}

uint64_t virtio_dev_device_features(struct virtio_dev *vd)
{
	return vd->ops->device_features(vd->t);
}

void virtio_dev_set_features(struct virtio_dev *vd, uint64_t features)
{
	vd->ops->set_features(vd->t, features);
}

uint16_t virtio_dev_num_queues(struct virtio_dev *vd)
{
	return vd->ops->num_queues(vd->t);
}

int virtio_dev_cfg_read(struct virtio_dev *vd, uint32_t off, void *buf, uint32_t len)
{
	return vd->ops->cfg_read(vd->t, off, buf, len);
}

int virtio_dev_irq_setup(struct virtio_dev *vd, const struct virtio_irq_plan *plan, char *err,
                         size_t errlen)
{
	return vd->ops->irq_setup(vd->t, plan, err, errlen);
}

const char *virtio_dev_irq_mode_name(const struct virtio_dev *vd)
{
	return vd->ops->irq_mode_name(vd->t);
}

int virtio_dev_queue_setup(struct virtio_dev *vd, struct virtq *vq, uint16_t qidx, bool event_idx,
                           char *err, size_t errlen)
{
	return vd->ops->queue_setup(vd->t, vq, qidx, event_idx, err, errlen);
}

const volatile uint64_t *virtio_dev_irqs(const struct virtio_dev *vd)
{
	return vd->irqs;
}

bool virtio_dev_config_changed(const struct virtio_dev *vd)
{
	return *vd->config_changed;
}

void virtio_dev_config_clear(struct virtio_dev *vd)
{
	*vd->config_changed = false;
}
