/* C helpers shared by the cgo preambles of embedder.go, reranker.go and outputs.go (each
 * file's preamble is compiled on its own, so shared static helpers live here). */
#ifndef EMBD_GO_H
#define EMBD_GO_H

#include <stdlib.h>
#include <string.h>
#include <embedder.h>

/* A malloc'd copy of embd_last_error(), taken in the same C call as the failing
 * embd_* function: the message is per OS thread, and a goroutine may move to
 * another thread between two cgo calls. The caller frees it with free(). */
static char *embd_go_copy_error(void) {
	const char *e = embd_last_error();
	size_t n = strlen(e);
	char *c = (char *)malloc(n + 1);
	if (c != NULL) memcpy(c, e, n + 1);
	return c;
}

/* The embd_text of n texts laid end to end in buf (one length per text; see
 * packTexts), malloc'd (freed by the caller), or NULL. */
static embd_text *embd_go_texts(const char *buf, const size_t *lens, size_t n) {
	embd_text *texts = (embd_text *)malloc((n ? n : 1) * sizeof(embd_text));
	if (texts == NULL) return NULL;
	size_t off = 0;
	for (size_t i = 0; i < n; i++) {
		texts[i].ptr = lens[i] ? buf + off : NULL;
		texts[i].len = lens[i];
		off += lens[i];
	}
	return texts;
}

// A call options object (normalize -1/0/1, dims 0 = the model's, prompt /
// prompt_name NULL = unset, truncation an EMBD_TRUNCATION_* constant), or
// NULL with *st and *err set.
static embd_call_options *embd_go_call_options(int normalize, size_t dims, const char *prompt,
                                               const char *prompt_name, embd_truncation truncation,
                                               embd_status *st, char **err) {
	embd_call_options *o = embd_call_options_new();
	if (o == NULL) {
		*err = embd_go_copy_error();
		*st = EMBD_STATUS_INTERNAL;
		return NULL;
	}
	*st = embd_call_options_set_normalize(o, normalize);
	if (*st == EMBD_STATUS_OK) *st = embd_call_options_set_dimensions(o, dims);
	if (*st == EMBD_STATUS_OK) *st = embd_call_options_set_prompt(o, prompt);
	if (*st == EMBD_STATUS_OK) *st = embd_call_options_set_prompt_name(o, prompt_name);
	if (*st == EMBD_STATUS_OK) *st = embd_call_options_set_truncation(o, truncation);
	if (*st != EMBD_STATUS_OK) {
		*err = embd_go_copy_error();
		embd_call_options_free(o);
		return NULL;
	}
	return o;
}

#endif
