def beta(text):
    # TODO: handle empty text
    words = text.split()
    # TODO: strip punctuation
    return len(words)
