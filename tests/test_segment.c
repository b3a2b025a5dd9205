/*
 * test_segment.c — the sentence splitter of translate/segment.h: where it
 * cuts, where it must not (abbreviations, initials, decimals, acronyms,
 * numbered references, lower-case continuations), quotes and brackets,
 * Spanish and Unicode punctuation, white space, and the sizing call.
 */
#include "testutil.h"
#include "translate/segment.h"

#include <stdio.h>
#include <string.h>

/* The sentences of text joined by " | ". */
static void split_joined(const char *text, char *out, size_t cap) {
    pmt_span spans[32];
    int n = pmt_sentence_split(text, strlen(text), spans, 32);
    out[0] = '\0';
    for (int i = 0; i < n && i < 32; i++) {
        size_t used = strlen(out);
        snprintf(out + used, cap - used, "%s%.*s", i ? " | " : "", (int)(spans[i].end - spans[i].start),
                 text + spans[i].start);
    }
}

static void expect(const char *text, const char *want) {
    char got[1024];
    split_joined(text, got, sizeof got);
    CHECK_MSG(!strcmp(got, want), "split(\"%s\") = \"%s\", want \"%s\"", text, got, want);
}

int main(void) {
    /* Cuts. */
    expect("I like cats. Where is the station?", "I like cats. | Where is the station?");
    expect("Wake up! You're half asleep.", "Wake up! | You're half asleep.");
    expect("Really?! Yes.", "Really?! | Yes.");
    expect("Wait... What happened?", "Wait... | What happened?");
    expect("It was 1999. 2000 came next.", "It was 1999. | 2000 came next.");
    expect("\"If you're tired, why don't you go to sleep?\" \"Because I can't.\"",
           "\"If you're tired, why don't you go to sleep?\" | \"Because I can't.\"");
    expect("He left (in a hurry.) Then it rained.", "He left (in a hurry.) | Then it rained.");
    expect("Es tarde. ¿Vienes? ¡Vamos!", "Es tarde. | ¿Vienes? | ¡Vamos!");
    expect("He said “no.” “Why?” she asked.", "He said “no.” | “Why?” she asked.");
    expect("Le gusta París. Él vive aquí.", "Le gusta París. | Él vive aquí.");
    expect("It is over… Or is it?", "It is over… | Or is it?");
    /* No cut. */
    expect("Mr. Smith met Dr. Jones at St. Paul's.", "Mr. Smith met Dr. Jones at St. Paul's.");
    expect("J. R. R. Tolkien wrote it.", "J. R. R. Tolkien wrote it.");
    expect("The U.S. Army and e.g. The Times.", "The U.S. Army and e.g. The Times.");
    expect("Pi is 3.14. It never ends.", "Pi is 3.14. | It never ends.");
    expect("See No. 5 and pp. 12 today.", "See No. 5 and pp. 12 today.");
    expect("I live at No. Street. No. Really.", "I live at No. | Street. | No. | Really.");
    expect("he said. and then left", "he said. and then left");
    expect("Version 2.0 is out.", "Version 2.0 is out.");
    expect("Hello.World.", "Hello.World.");
    expect("(Mr. Brown) came.", "(Mr. Brown) came.");
    expect("What? no way", "What? no way");
    /* White space. */
    expect("  I like cats.   Where is it?  ", "I like cats. | Where is it?");
    expect("One.\tTwo.", "One. | Two.");
    expect("", "");
    expect("   \t ", "");
    expect("No terminator at all", "No terminator at all");
    expect(".", ".");
    expect("?!", "?!");
    /* Spans point into the text, trimmed; the count sizes the array. */
    const char *text = " A. B. C. D. Eve is here. Fay is there. Gil left. ";
    CHECK(pmt_sentence_split(text, strlen(text), NULL, 0) == 3);
    pmt_span one[1];
    CHECK(pmt_sentence_split(text, strlen(text), one, 1) == 3);
    CHECK(one[0].start == 1 && !strncmp(text + one[0].end - 5, "here.", 5));
    /* A length shorter than the string: only that prefix is read. */
    const char *two = "Stop. Go.";
    pmt_span s[4];
    CHECK(pmt_sentence_split(two, 5, s, 4) == 1 && s[0].start == 0 && s[0].end == 5);
    return test_finish();
}
