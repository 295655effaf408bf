// SPDX-License-Identifier: MIT
/* channel.c - one step done to every channel of a session (channel.h). */
#include "channel.h"

int channels__add(struct channel_set *set, struct channel *c)
{
	if (!c)
		return 0;
	if (set->n == CHANNELS_MAX)
		return -1;
	set->ch[set->n++] = c;
	return 0;
}

void channels__drop(struct channel_set *set, struct channel *c)
{
	for (int i = 0; i < set->n; i++)
		if (set->ch[i] == c) {
			for (int j = i + 1; j < set->n; j++)
				set->ch[j - 1] = set->ch[j];
			set->n--;
			return;
		}
}

int channels__add_target(struct channel_set *set, const struct lj_target *t, struct zones *z,
			 char *err, size_t errsz)
{
	for (int i = 0; i < set->n; i++)
		if (set->ch[i]->ops->add_target(set->ch[i], t, z, err, errsz))
			return -1;
	return 0;
}

void channels__poll(struct channel_set *set)
{
	for (int i = 0; i < set->n; i++)
		if (set->ch[i]->ops->poll)
			set->ch[i]->ops->poll(set->ch[i]);
}

void channels__remove_target(struct channel_set *set, const struct lj_target *t)
{
	for (int i = 0; i < set->n; i++)
		set->ch[i]->ops->remove_target(set->ch[i], t);
}

void channels__set_zones(struct channel_set *set, const struct lj_target *t, struct zones *z)
{
	for (int i = 0; i < set->n; i++)
		set->ch[i]->ops->set_zones(set->ch[i], t, z);
}

void channels__pause(struct channel_set *set, bool paused)
{
	for (int i = 0; i < set->n; i++)
		set->ch[i]->ops->pause(set->ch[i], paused);
}

bool channels__target_execed(struct channel_set *set, pid_t pid)
{
	if (!set->n || !set->ch[0]->ops->target_execed(set->ch[0], pid))
		return false;
	for (int i = 1; i < set->n; i++)
		set->ch[i]->ops->target_execed(set->ch[i], pid);
	return true;
}

void channels__close(struct channel_set *set)
{
	for (int i = 0; i < set->n; i++)
		set->ch[i]->ops->close(set->ch[i]);
	set->n = 0;
}
