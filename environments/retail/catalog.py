"""The product catalog the Retail generator draws from: product types, options and prices.

Each entry: product name, option names with their possible values (in display order), and
the price range of a variant in dollars. Variants are combinations of one value per option.
"""

from __future__ import annotations

CatalogEntry = tuple[str, tuple[tuple[str, tuple[str, ...]], ...], tuple[float, float]]

_COLORS = ("black", "white", "red", "blue", "green", "grey", "purple", "yellow")

CATALOG: tuple[CatalogEntry, ...] = (
    (
        "T-Shirt",
        (
            ("color", _COLORS),
            ("size", ("S", "M", "L", "XL", "XXL")),
            ("material", ("cotton", "polyester", "linen")),
        ),
        (9, 45),
    ),
    (
        "Water Bottle",
        (
            ("capacity", ("350ml", "500ml", "750ml", "1000ml", "1500ml")),
            ("material", ("stainless steel", "plastic", "glass")),
            ("color", _COLORS),
        ),
        (8, 60),
    ),
    (
        "Desk Lamp",
        (
            ("color", ("black", "white", "silver", "brass", "blue")),
            ("brightness", ("low", "medium", "high", "adjustable")),
            ("power source", ("AC adapter", "USB", "battery")),
        ),
        (18, 160),
    ),
    (
        "Running Shoes",
        (
            ("size", ("6", "7", "8", "9", "10", "11", "12", "13")),
            ("color", ("black", "white", "red", "blue", "grey", "orange")),
            ("material", ("mesh", "leather", "synthetic")),
        ),
        (45, 210),
    ),
    (
        "Backpack",
        (
            ("color", ("black", "navy", "grey", "green", "red")),
            ("size", ("small", "medium", "large")),
            ("material", ("nylon", "polyester", "leather", "canvas")),
            ("compartment", ("laptop", "hydration", "camera")),
        ),
        (25, 180),
    ),
    (
        "Wireless Earbuds",
        (
            ("color", ("black", "white", "blue", "pink", "green")),
            ("battery life", ("4 hours", "6 hours", "8 hours", "10 hours")),
            ("water resistance", ("none", "IPX4", "IPX7")),
        ),
        (30, 260),
    ),
    (
        "Coffee Maker",
        (
            ("color", ("black", "stainless steel", "white", "red")),
            ("capacity", ("1 cup", "4 cups", "8 cups", "12 cups")),
            ("type", ("drip", "espresso", "french press", "pour over")),
        ),
        (25, 420),
    ),
    (
        "Office Chair",
        (
            ("material", ("mesh", "leather", "fabric")),
            ("color", ("black", "grey", "blue", "red", "white")),
            ("armrest", ("fixed", "adjustable", "none")),
            ("backrest height", ("standard", "high-back")),
        ),
        (90, 520),
    ),
    (
        "Laptop",
        (
            ("screen size", ("13-inch", "14-inch", "15-inch", "17-inch")),
            ("processor", ("i5", "i7", "i9")),
            ("ram", ("8GB", "16GB", "32GB")),
            ("storage", ("256GB SSD", "512GB SSD", "1TB SSD")),
        ),
        (480, 2600),
    ),
    (
        "Smartphone",
        (
            ("color", ("black", "silver", "gold", "blue", "green")),
            ("storage", ("64GB", "128GB", "256GB", "512GB")),
            ("screen size", ("5.8-inch", "6.1-inch", "6.7-inch")),
        ),
        (240, 1350),
    ),
    (
        "Bluetooth Speaker",
        (
            ("color", ("black", "blue", "red", "green", "white")),
            ("battery life", ("8 hours", "12 hours", "20 hours", "30 hours")),
            ("water resistance", ("no", "yes")),
        ),
        (20, 240),
    ),
    (
        "Yoga Mat",
        (
            ("thickness", ("3mm", "4mm", "6mm", "8mm")),
            ("material", ("PVC", "TPE", "natural rubber", "cork")),
            ("color", ("blue", "purple", "green", "pink", "black")),
        ),
        (12, 95),
    ),
    (
        "Mechanical Keyboard",
        (
            ("switch type", ("linear", "tactile", "clicky")),
            ("backlight", ("none", "white", "RGB")),
            ("size", ("full size", "tenkeyless", "75%", "60%")),
        ),
        (45, 230),
    ),
    (
        "Gaming Mouse",
        (
            ("color", ("black", "white", "RGB")),
            ("sensor type", ("optical", "laser")),
            ("connectivity", ("wired", "wireless", "bluetooth")),
            ("weight", ("light", "standard", "heavy")),
        ),
        (19, 160),
    ),
    (
        "Electric Kettle",
        (
            ("capacity", ("0.8L", "1L", "1.5L", "1.7L", "2L")),
            ("material", ("stainless steel", "plastic", "glass")),
            ("color", ("white", "black", "silver", "red")),
        ),
        (18, 140),
    ),
    (
        "Hiking Boots",
        (
            ("size", ("7", "8", "9", "10", "11", "12")),
            ("material", ("leather", "synthetic", "suede")),
            ("waterproof", ("yes", "no")),
            ("color", ("brown", "black", "grey")),
        ),
        (70, 290),
    ),
    (
        "Sunglasses",
        (
            ("frame color", ("black", "brown", "silver", "gold", "tortoise")),
            ("lens color", ("grey", "brown", "green", "blue")),
            ("lens type", ("polarized", "non-polarized")),
            ("frame material", ("plastic", "metal")),
        ),
        (15, 260),
    ),
    (
        "Wall Clock",
        (
            ("diameter", ("8 inches", "10 inches", "12 inches", "14 inches")),
            ("color", ("black", "white", "wood", "silver", "gold")),
            ("type", ("analog", "digital")),
        ),
        (12, 110),
    ),
    (
        "Air Purifier",
        (
            ("room size", ("small", "medium", "large", "extra large")),
            ("filter type", ("HEPA", "carbon", "ionic")),
            ("features", ("none", "quiet operation", "smart sensors", "night mode")),
        ),
        (60, 480),
    ),
    (
        "Digital Camera",
        (
            ("resolution", ("16MP", "20MP", "24MP", "30MP")),
            ("zoom", ("3x", "5x", "10x")),
            ("storage", ("SD card", "CF card", "internal")),
            ("color", ("black", "silver")),
        ),
        (180, 2100),
    ),
    (
        "Skateboard",
        (
            ("deck material", ("maple", "bamboo", "plastic")),
            ("length", ("28 inch", "31 inch", "34 inch")),
            ("design", ("plain", "graphic", "custom")),
            ("wheel size", ("52mm", "54mm", "56mm")),
        ),
        (40, 230),
    ),
    (
        "Garden Hose",
        (
            ("length", ("25ft", "50ft", "75ft", "100ft")),
            ("material", ("vinyl", "rubber", "latex")),
            ("color", ("green", "black", "blue", "orange")),
        ),
        (15, 110),
    ),
    (
        "Headphones",
        (
            ("type", ("on-ear", "over-ear", "in-ear")),
            ("connectivity", ("wired", "wireless")),
            ("color", ("black", "white", "blue", "red", "silver")),
            ("noise cancelling", ("yes", "no")),
        ),
        (25, 420),
    ),
    (
        "Bookshelf",
        (
            ("material", ("wood", "metal", "glass", "bamboo")),
            ("color", ("white", "black", "brown", "natural")),
            ("height", ("3 ft", "4 ft", "5 ft", "6 ft")),
        ),
        (45, 380),
    ),
    (
        "Electric Toothbrush",
        (
            ("color", ("white", "black", "blue", "pink", "green")),
            ("speed settings", ("low", "medium", "high")),
            ("battery type", ("rechargeable", "AA batteries")),
        ),
        (20, 230),
    ),
    (
        "Action Camera",
        (
            ("resolution", ("1080p", "4K", "5K")),
            ("waterproof", ("yes", "no")),
            ("color", ("black", "silver", "blue", "red")),
            ("mount", ("none", "helmet", "chest")),
        ),
        (80, 520),
    ),
    (
        "Tablet",
        (
            ("screen size", ("8-inch", "10-inch", "11-inch", "12-inch")),
            ("storage", ("32GB", "64GB", "128GB", "256GB")),
            ("color", ("black", "silver", "gold", "blue")),
        ),
        (120, 1100),
    ),
    (
        "Smart Watch",
        (
            ("color", ("black", "silver", "gold", "rose gold", "blue")),
            ("band material", ("silicone", "leather", "metal", "nylon")),
            ("display", ("LCD", "AMOLED")),
        ),
        (90, 640),
    ),
    (
        "Vacuum Cleaner",
        (
            ("type", ("upright", "canister", "robotic", "handheld")),
            ("bagged or bagless", ("bagged", "bagless")),
            ("features", ("none", "HEPA filter", "pet hair removal", "cordless")),
        ),
        (70, 720),
    ),
    (
        "Cycling Helmet",
        (
            ("size", ("XS", "S", "M", "L", "XL")),
            ("color", ("black", "white", "red", "blue", "green", "yellow")),
            ("ventilation", ("low", "medium", "high")),
        ),
        (30, 260),
    ),
    (
        "Tea Kettle",
        (
            ("material", ("stainless steel", "glass", "ceramic", "cast iron")),
            ("capacity", ("1 liter", "1.5 liters", "2 liters", "2.5 liters")),
            ("stovetop compatibility", ("gas", "electric", "induction")),
        ),
        (20, 160),
    ),
    (
        "Jigsaw Puzzle",
        (
            ("pieces", ("300", "500", "1000", "1500", "2000")),
            ("theme", ("animals", "landscapes", "art", "fantasy", "cities")),
            ("difficulty level", ("beginner", "intermediate", "expert")),
        ),
        (9, 70),
    ),
    (
        "Notebook",
        (
            ("size", ("A4", "A5", "B5", "pocket")),
            ("cover", ("hard cover", "soft cover", "spiral")),
            ("paper", ("lined", "dotted", "grid", "blank")),
        ),
        (4, 38),
    ),
    (
        "Pet Bed",
        (
            ("size", ("small", "medium", "large", "extra large")),
            ("material", ("memory foam", "polyester", "fleece", "orthopedic")),
            ("color", ("grey", "brown", "beige", "blue", "pink")),
        ),
        (18, 180),
    ),
    (
        "Indoor Security Camera",
        (
            ("resolution", ("720p", "1080p", "2K", "4K")),
            ("field of view", ("110 degrees", "130 degrees", "160 degrees")),
            ("connectivity", ("Wi-Fi", "Ethernet")),
        ),
        (25, 320),
    ),
    (
        "Portable Charger",
        (
            ("capacity", ("5000mAh", "10000mAh", "20000mAh", "30000mAh")),
            ("output", ("USB-A", "USB-C", "wireless")),
            ("color", ("black", "white", "blue", "red")),
        ),
        (12, 140),
    ),
    (
        "Fleece Jacket",
        (
            ("size", ("XS", "S", "M", "L", "XL", "XXL")),
            ("color", ("black", "navy", "red", "green", "grey")),
            ("zipper", ("full", "half", "quarter")),
        ),
        (30, 190),
    ),
    (
        "Cookware Set",
        (
            ("material", ("stainless steel", "non-stick", "cast iron", "copper")),
            ("pieces", ("5", "8", "10", "12")),
            ("oven safe", ("yes", "no")),
        ),
        (60, 620),
    ),
    (
        "Sneakers",
        (
            ("size", ("5", "6", "7", "8", "9", "10", "11", "12")),
            ("color", ("white", "black", "grey", "red", "navy")),
            ("sole", ("rubber", "EVA", "foam")),
        ),
        (40, 220),
    ),
    (
        "Dumbbells",
        (
            ("weight range", ("5-25 lbs", "10-50 lbs", "20-80 lbs", "30-100 lbs")),
            ("material", ("iron", "rubber", "urethane", "neoprene")),
            ("set type", ("fixed", "adjustable")),
        ),
        (35, 560),
    ),
    (
        "Perfume",
        (
            ("scent family", ("floral", "woody", "fresh", "oriental", "citrus")),
            ("size", ("30ml", "50ml", "100ml")),
            ("gender", ("men", "women", "unisex")),
        ),
        (25, 260),
    ),
    (
        "Makeup Kit",
        (
            ("skin tone", ("light", "medium", "tan", "dark")),
            ("kit size", ("basic", "professional", "travel")),
            ("brand", ("Aurora", "Lumen", "Velvet", "Zephyr")),
        ),
        (20, 240),
    ),
    (
        "Grill",
        (
            ("type", ("charcoal", "gas", "electric", "pellet")),
            ("size", ("portable", "medium", "large")),
            ("features", ("none", "side burner", "rotisserie", "smoker box")),
        ),
        (70, 1150),
    ),
    (
        "Fleece Blanket",
        (
            ("size", ("throw", "twin", "queen", "king")),
            ("color", ("grey", "navy", "cream", "red", "green", "pink")),
            ("pattern", ("solid", "plaid", "striped")),
        ),
        (15, 95),
    ),
    (
        "Luggage Set",
        (
            ("piece count", ("2-piece", "3-piece", "4-piece")),
            ("color", ("black", "navy", "silver", "red", "green")),
            ("material", ("hardshell", "softshell", "aluminum")),
        ),
        (90, 720),
    ),
    (
        "Espresso Machine",
        (
            ("pressure", ("9 bar", "15 bar", "19 bar")),
            ("capacity", ("1L", "1.5L", "2L")),
            ("type", ("manual", "automatic", "capsule")),
            ("color", ("black", "silver", "red")),
        ),
        (110, 1650),
    ),
    (
        "Patio Umbrella",
        (
            ("size", ("6 ft", "7.5 ft", "9 ft", "11 ft")),
            ("color", ("beige", "green", "red", "blue", "black")),
            ("material", ("polyester", "olefin", "sunbrella")),
            ("tilt mechanism", ("manual", "auto")),
        ),
        (35, 360),
    ),
    (
        "Wristwatch",
        (
            ("strap material", ("leather", "metal", "silicone", "fabric")),
            ("dial color", ("black", "white", "blue", "green", "silver")),
            ("movement", ("quartz", "automatic")),
        ),
        (40, 980),
    ),
    (
        "Bicycle",
        (
            ("frame size", ("small", "medium", "large", "extra large")),
            ("color", ("black", "red", "blue", "green", "white")),
            ("type", ("road", "mountain", "hybrid", "city")),
        ),
        (240, 1900),
    ),
    (
        "Cutting Board",
        (
            ("material", ("bamboo", "maple", "walnut", "plastic", "glass")),
            ("size", ("small", "medium", "large")),
            ("feature", ("plain", "juice groove", "handles", "non-slip")),
        ),
        (10, 95),
    ),
)

EXTRA_STYLES: tuple[str, ...] = (
    "Bamboo",
    "Ceramic",
    "Linen",
    "Wool",
    "Copper",
    "Marble",
    "Canvas",
    "Velvet",
    "Rattan",
    "Cork",
)
EXTRA_NOUNS: tuple[str, ...] = (
    "Planter",
    "Scarf",
    "Wallet",
    "Candle Holder",
    "Vase",
    "Throw Pillow",
    "Picture Frame",
    "Doormat",
    "Bath Rug",
    "Coasters",
    "Tote Bag",
    "Lunch Box",
    "Serving Tray",
    "Drawer Organizer",
    "Pencil Case",
    "Beanie",
    "Table Runner",
    "Storage Basket",
    "Key Holder",
    "Floating Shelf",
    "Bread Box",
    "Soap Dispenser",
    "Laundry Hamper",
    "Plant Stand",
    "Magazine Rack",
    "Jewelry Box",
    "Napkin Rings",
    "Wine Rack",
    "Spice Rack",
    "Shoe Rack",
)
EXTRA_OPTIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("color", _COLORS),
    ("size", ("small", "medium", "large")),
)
"""Product types that only long-context worlds carry (style x noun, e.g. "Bamboo Vase"):
none shares a word with a catalog product's name, so a request naming a catalog product
still names one product type."""
