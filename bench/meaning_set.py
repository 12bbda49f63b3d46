"""The paraphrase evaluation set of recall by meaning (bench/meaning_eval.py).

8 subjects, 13 facts each (104 facts). Each fact has a query that asks for it in other
words: the query shares no content word with its fact (checked by `shared_words`, after
folding case and simple endings; tests/test_meaning_set.py), as an agent asks "money
back?" of a fact that says "refund". The exact-word query of a fact is its own text.

`NAMED` is a second, smaller set: 2 subjects of 12 facts in which a name or a number (an
order, a colleague) is shared by several facts, and each query names it and says the rest
in other words ("order 7 came broken" of "Order 7 arrived damaged", beside "Order 9 arrived
with a crushed box"), as an agent asks about one order or one person. Its words shared with
its fact are only that name (and "order"), and each of them is in at least two of the
subject's facts, so the name alone does not pick the fact and neither do the other words.

`IDENTIFIERS` is a third: 2 subjects of 12 facts, each naming one opaque identifier (a
ticket, a server) that no other fact holds, issued in sequence as a ticketing system or an
inventory issues them (48213, 48214, …; srv4471, srv4472, …), two facts of each kind. Each
query names the identifier and says the rest in other words ("money back wanted in 48213" of
"Ticket 48213 asks for a refund on a blender"): the identifier is its only shared word. A
static model's vectors barely tell neighbouring numbers apart; this is the class where the
words are expected to earn their place in the fusion.
"""

import re

SET = {
    "customer:ana": [
        ("Prefers a refund to store credit", "does she want her money back or a voucher"),
        ("Allergic to peanuts", "nut allergy"),
        ("Lives in Lyon, France", "which city is her home"),
        ("Her order 7 arrived damaged", "parcel came broken"),
        ("Speaks Portuguese at home", "what language does she use with family"),
        ("Pays with a Visa credit card", "payment method"),
        ("Works night shifts at a hospital", "job and hours"),
        ("Has two young daughters", "kids"),
        ("Cancelled her gym membership in March", "stopped fitness subscription"),
        ("Wants invoices sent by email", "how should bills be delivered"),
        ("Dislikes phone calls", "does she mind being rung up"),
        ("Birthday is on 14 July", "when was she born"),
        ("Drives an electric car", "vehicle"),
    ],
    "customer:ben": [
        ("Is vegetarian and eats no meat", "diet"),
        ("Moved from Berlin to Madrid last year", "relocated to spain"),
        ("Owns a golden retriever named Max", "pet dog"),
        ("Prefers morning delivery slots", "best time for a courier to come"),
        ("Runs a small bakery", "his business"),
        ("Is hard of hearing", "deaf"),
        ("Uses a wheelchair", "mobility needs"),
        ("Complained about late shipping twice", "unhappy with slow parcels"),
        ("Subscribed to the annual premium plan", "yearly paid tier"),
        ("Allergic to penicillin", "antibiotic reaction"),
        ("Plays the cello in an orchestra", "music hobby"),
        ("Asked to unsubscribe from newsletters", "marketing mail opt-out"),
        ("Travels to Tokyo every spring", "yearly trip to japan"),
    ],
    "customer:chloe": [
        ("Is lactose intolerant", "dairy problem"),
        ("Her laptop screen cracked", "broken computer display"),
        ("Studies medicine at university", "what is she learning at college"),
        ("Prefers chat support over email", "best contact channel"),
        ("Lost her luggage on flight 212", "missing suitcase after plane trip"),
        ("Is saving money for a house", "mortgage deposit plans"),
        ("Runs marathons", "long distance running"),
        ("Her rent is due on the first of each month", "when does the landlord get paid"),
        ("Has a cat called Miso", "kitten"),
        ("Speaks fluent Mandarin", "chinese language skills"),
        ("Bank account was frozen in June", "blocked funds"),
        ("Wants a vegan birthday cake", "plant based dessert for celebration"),
        ("Is afraid of flying", "fear of planes"),
    ],
    "customer:dev": [
        ("Uses Linux on his work machine", "operating system"),
        ("Forgot his password three times this week", "locked out of account login"),
        ("Is colour blind", "cannot tell red from green"),
        ("Prefers dark mode in every app", "theme setting"),
        ("His company has 40 employees", "staff headcount"),
        ("Was overcharged on the March invoice", "billed too much"),
        ("Wants two-factor authentication turned on", "extra sign-in security"),
        ("Lives near the sea in Porto", "coastal town"),
        ("Is allergic to cats", "feline sneezing"),
        ("Learns to play chess", "board game hobby"),
        ("Upgraded to the team plan", "bigger subscription tier"),
        ("His daughter starts school in September", "kid begins classes"),
        ("Drinks no coffee", "caffeine"),
    ],
    "customer:eva": [
        ("Is pregnant and due in May", "expecting a baby"),
        ("Prefers WhatsApp messages", "how to text her"),
        ("Has diabetes", "blood sugar condition"),
        ("Returned the blue sofa", "sent furniture back"),
        ("Works as a lawyer", "profession"),
        ("Wants deliveries left with a neighbour", "where should parcels go if nobody is in"),
        ("Her father is in hospital", "dad unwell"),
        ("Gets migraines from bright light", "headaches"),
        ("Ordered a wedding dress", "bridal gown purchase"),
        ("Is learning to drive", "lessons for a licence"),
        ("Bought a flat in Vienna", "property purchase in austria"),
        ("Prefers paper receipts", "printed proof of purchase"),
        ("Volunteers at an animal shelter", "charity work"),
    ],
    "customer:femi": [
        ("Supports Arsenal football club", "favourite soccer team"),
        ("Works remotely from Lagos", "home office in nigeria"),
        ("Is gluten intolerant", "wheat problem"),
        ("Has a broken left wrist", "arm injury"),
        ("Prefers to pay in instalments", "split payment"),
        ("Owns a recording studio", "music business"),
        ("His phone number changed last week", "new mobile contact"),
        ("Wants a window seat on flights", "where does he like to sit on planes"),
        ("Studies Spanish in the evenings", "language classes"),
        ("Received the wrong size shoes", "footwear did not fit"),
        ("Is a night owl who sleeps late", "wakes up around noon"),
        ("Donates to a children's charity", "gives money to kids"),
        ("Dislikes spicy food", "chilli"),
    ],
    "customer:gus": [
        ("Is retired and 72 years old", "age"),
        ("Has poor eyesight and needs large print", "vision trouble"),
        ("Lives alone with his parrot", "bird"),
        ("Takes blood pressure medication daily", "hypertension pills"),
        ("Prefers letters by post", "mail"),
        ("Was a carpenter for forty years", "former woodwork career"),
        ("His pension arrives on the 15th", "when does retirement income come"),
        ("Grows tomatoes in his garden", "vegetable patch"),
        ("Cannot climb stairs", "needs a lift"),
        ("His son handles his banking", "who manages his money"),
        ("Watches cricket every weekend", "sport on tv"),
        ("Asked for a refund on the heater", "money back for radiator"),
        ("Is hard to reach before 10 am", "early calls"),
    ],
    "customer:hana": [
        ("Runs an online ceramics shop", "pottery business"),
        ("Is a Japanese citizen", "nationality"),
        ("Prefers invoices in euros", "currency"),
        ("Her shop website went down on Friday", "store offline"),
        ("Has a peanut allergy and carries an epipen", "nut reaction"),
        ("Is moving to Copenhagen in August", "relocation to denmark"),
        ("Wants the newsletter in English", "language for marketing emails"),
        ("Uses an iPhone", "mobile device"),
        ("Sells mostly to customers in Germany", "main market"),
        ("Had a chargeback dispute in April", "contested card payment"),
        ("Takes Fridays off", "which weekday is she not available"),
        ("Is vegan", "diet"),
        ("Hired her first employee in January", "new staff member"),
    ],
}

NAMED = {
    "account:ivo-orders": [
        ("Order 7 arrived damaged", "order 7 came broken"),
        ("Order 7 was paid with a gift card", "how was order 7 settled"),
        ("Order 7 is a present for his niece", "who receives order 7"),
        ("Order 7 must go to his office address", "where should order 7 be shipped"),
        ("Order 9 was delivered two weeks late", "order 9 delay"),
        ("Order 9 was refunded in full", "money back for order 9"),
        ("Order 9 contained the wrong size", "order 9 did not fit"),
        ("Order 9 was left with a neighbour", "who took in order 9"),
        ("Order 12 is still waiting for stock", "order 12 not yet available"),
        ("Order 12 will be paid by bank transfer", "order 12 payment method"),
        ("Order 12 should be gift wrapped", "order 12 present packaging"),
        ("Order 12 needs express shipping", "order 12 urgent courier"),
    ],
    "team:support": [
        ("Priya approves refunds over 100 euros", "does Priya sign off large money back"),
        ("Priya works from Lisbon", "where is Priya based"),
        ("Priya is on leave in May", "Priya holiday dates"),
        ("Priya speaks Hindi and English", "Priya languages"),
        ("Marco handles shipping complaints", "Marco deals with delivery grievances"),
        ("Marco works from Milan", "where is Marco based"),
        ("Marco is on leave in August", "Marco holiday dates"),
        ("Marco speaks Italian and Spanish", "Marco languages"),
        ("Lena answers the phone line", "Lena takes calls"),
        ("Lena works from Berlin", "where is Lena based"),
        ("Lena is on leave in December", "Lena holiday dates"),
        ("Lena speaks German and French", "Lena languages"),
    ],
}

IDENTIFIERS = {
    "account:kim-tickets": [
        ("Ticket 48213 asks for a refund on a blender", "money back wanted in 48213"),
        ("Ticket 48214 asks for a refund on a toaster", "48214 wants money returned"),
        ("Ticket 48215 reports a parcel that never arrived", "48215 lost shipment"),
        ("Ticket 48216 reports a parcel that never arrived", "missing package in 48216"),
        ("Ticket 48217 was escalated to a manager", "48217 passed up to a supervisor"),
        ("Ticket 48218 was escalated to a manager", "supervisor took over 48218"),
        ("Ticket 48219 is waiting for the customer's reply", "48219 pending an answer from the client"),
        ("Ticket 48220 is waiting for the customer's reply", "48220 needs the buyer to respond"),
        ("Ticket 48221 was closed as a duplicate", "48221 same as another case"),
        ("Ticket 48222 was closed as a duplicate", "48222 repeated case shut"),
        ("Ticket 48223 mentions a damaged screen", "48223 cracked display"),
        ("Ticket 48224 mentions a damaged screen", "broken display in 48224"),
    ],
    "hosts:ops": [
        ("Server srv4471 runs out of disk every Friday", "srv4471 storage fills up weekly"),
        ("Server srv4472 runs out of disk every Friday", "weekly full storage on srv4472"),
        ("Server srv4473 reboots after each kernel update", "srv4473 restarts following system upgrades"),
        ("Server srv4474 reboots after each kernel update", "system upgrades restart srv4474"),
        ("Server srv4475 holds the billing database", "srv4475 stores invoice records"),
        ("Server srv4476 holds the billing database", "invoice records live on srv4476"),
        ("Server srv4477 is owned by the payments team", "who maintains srv4477"),
        ("Server srv4478 is owned by the payments team", "srv4478 belongs to checkout engineers"),
        ("Server srv4479 must be patched before March", "srv4479 upgrade deadline in spring"),
        ("Server srv4480 must be patched before March", "srv4480 upgrade due in spring"),
        ("Server srv4481 sends alerts to the night rota", "srv4481 pages the overnight on-call"),
        ("Server srv4482 sends alerts to the night rota", "overnight on-call gets srv4482 warnings"),
    ],
}

# The words that say nothing of a fact's subject matter, as recall drops them
# (conversations/facts/recall.py STOP_WORDS), plus a few query words of the same kind.
_STOP = frozenset(
    "a about an and any are as at be been but by can could did do does for from had has have he her hers him "
    "his how i if in into is it its me my of on or our she should so than that the their them they this to "
    "us was we were what when where which who whom why will with would you your not yet".split())
_WORD = re.compile(r"[A-Za-z0-9]+")


def _fold(word: str) -> str:
    word = word.casefold()
    for ending in ("ing", "ed", "es", "s"):
        if len(word) > len(ending) + 2 and word.endswith(ending):
            return word[: -len(ending)]
    return word


def content_words(text: str) -> set[str]:
    return {_fold(w) for w in _WORD.findall(text) if w.casefold() not in _STOP}


def shared_words(fact: str, query: str) -> set[str]:
    """The content words a query shares with its fact, case and simple endings folded."""
    return content_words(fact) & content_words(query)
